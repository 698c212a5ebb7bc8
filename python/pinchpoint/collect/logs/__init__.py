"""Reading tier logs: files, globs, rotation, the Rust nginx reader."""
