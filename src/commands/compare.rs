//! `viewerfleet compare`: one table across run folders.

use crate::cli::CompareArgs;
use crate::model::exit::Exit;
use crate::report::{compare, comparison_text, render};

pub async fn run(args: CompareArgs) -> anyhow::Result<super::Done> {
    let out = args.out.clone().unwrap_or_else(|| ".".into());
    let cmp = compare::compare_dirs(&args.run_dirs, args.group);
    if cmp.groups.is_empty() {
        for f in &cmp.failed {
            eprintln!("{}: {}", f.dir, f.error);
        }
        return Err(crate::model::exit::bad_input(anyhow::anyhow!(
            "none of the {} run folders could be read",
            args.run_dirs.len()
        )));
    }
    render::write_compare(&cmp, &out)?;
    print!("{}", comparison_text(&cmp));
    println!("HTML comparison: {}", out.join("compare.html").display());
    Ok(super::Done {
        exit: if cmp.failed.is_empty() {
            Exit::Ok
        } else {
            Exit::Failed
        },
        figures: args.json.then(|| super::json::compare(&cmp, &out)),
    })
}
