//! Compiles `proto/floe.proto` with a pure-Rust protobuf compiler (protox), so the build
//! needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/floe.proto");
    let descriptors = protox::compile(["proto/floe.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
