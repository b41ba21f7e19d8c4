//! No build step: this script exists so that cargo sets `OUT_DIR`, from which
//! `hostinfo::tree_of` learns the target folder this crate is built in (a binary inside it
//! belongs to this source tree).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
