//! Generates the etcd v3 gRPC client (messages and client stubs, no servers) from the protos
//! in `../proto` into the directory given as the only argument. `protoc` must be on PATH (or
//! named by `PROTOC`). Run through `../regenerate.sh`, which also formats the output.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: muster-etcd-codegen OUT_DIR")?
        .into();
    let proto = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    std::fs::create_dir_all(&out)?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .out_dir(&out)
        .compile_protos(&[proto.join("etcd/api/etcdserverpb/rpc.proto")], &[proto])?;
    // rpc.proto imports these only for HTTP-gateway and OpenAPI annotations: no generated
    // type refers to them, so they are not kept.
    for unused in ["google.api.rs", "grpc.gateway.protoc_gen_openapiv2.options.rs"] {
        std::fs::remove_file(out.join(unused))?;
    }
    Ok(())
}
