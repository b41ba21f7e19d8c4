//! `viewerfleet compare`: one table across run folders.

use crate::cli::CompareArgs;
use crate::report::{compare, comparison_text, render};
use std::process::ExitCode;

pub async fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let out = args.out.clone().unwrap_or_else(|| ".".into());
    let cmp = compare::compare_dirs(&args.run_dirs, args.group);
    if cmp.groups.is_empty() {
        for f in &cmp.failed {
            eprintln!("{}: {}", f.dir, f.error);
        }
        anyhow::bail!(
            "none of the {} run folders could be read",
            args.run_dirs.len()
        );
    }
    render::write_compare(&cmp, &out)?;
    print!("{}", comparison_text(&cmp));
    println!("HTML comparison: {}", out.join("compare.html").display());
    Ok(if cmp.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
