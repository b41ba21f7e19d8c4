//! Embeds the reference site's front-end (the player page, its script and the three npm
//! packages' files it loads) into the binary when `web/node_modules` is installed (`make
//! web-deps`), so an installed `viewerfleet` plays its own demo outside the source tree.
//! Without them the binary reads `web/` of the source tree at run time and says how to
//! install it when it is missing.

use std::path::Path;

/// The files the player page loads, relative to `web/`.
const FILES: [&str; 8] = [
    "embed.html",
    "light.html",
    "player.js",
    "light.js",
    "p2p-config.js",
    "node_modules/hls.js/dist/hls.mjs",
    "node_modules/p2p-media-loader-core/dist/p2p-media-loader-core.es.min.js",
    "node_modules/p2p-media-loader-hlsjs/dist/p2p-media-loader-hlsjs.es.min.js",
];

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let web = Path::new(&root).join("../../web");
    let out =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("web_files.rs");
    println!("cargo:rerun-if-changed=../../web/node_modules/.installed");
    for file in FILES {
        println!("cargo:rerun-if-changed=../../web/{file}");
    }
    let present = FILES.iter().all(|f| web.join(f).is_file());
    let code = if present {
        let entries: Vec<String> = FILES
            .iter()
            .map(|f| {
                let path = web.join(f);
                format!(
                    "    ({f:?}, include_bytes!({:?})),",
                    path.display().to_string()
                )
            })
            .collect();
        format!(
            "/// The front-end files embedded at build time (`web/` relative paths).\npub const EMBEDDED: Option<&[(&str, &[u8])]> = Some(&[\n{}\n]);\n",
            entries.join("\n")
        )
    } else {
        println!(
            "cargo:warning=web/node_modules is not installed: this binary does not carry the reference site's front-end (run `make web-deps` before building to embed it)"
        );
        "/// The front-end was not installed when this binary was built.\npub const EMBEDDED: Option<&[(&str, &[u8])]> = None;\n".to_string()
    };
    std::fs::write(out, code).expect("writing web_files.rs");
}
