//! The hub's own executable on an engine: a Docker volume per hub build (`agent-hub-bin-<build>`),
//! filled once through the engine's archive API and mounted read-only into that engine's
//! agents, so `agent-hub hook`, `agent-hub mcp` and the CLI work in every container, whatever
//! machine the engine is on. Every hub of the same build on the engine shares it.

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;
use bytes::Bytes;
use futures_util::StreamExt;

use super::archive::{self, Entry, Read};
use super::{docker_error, LABEL_MANAGED};
use crate::error::{HubError, HubResult};

/// The label that names the build a binary volume holds.
pub const LABEL_BINARY: &str = "agent-hub.binary";
/// Where the volume is mounted in an agent's container.
pub const DIR_IN_CONTAINER: &str = "/opt/agent-hub";
/// The executable's name in it.
pub const FILE_NAME: &str = "agent-hub";
/// Put last: the volume is whole.
const COMPLETE: &str = ".complete";

/// The volume's name for `build`.
pub fn volume_name(build: &str) -> String {
    let safe: String = build
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                true => c,
                false => '-',
            },
        )
        .collect();
    format!("agent-hub-bin-{safe}")
}

/// A build's name for the executable at `binary`: the hub's version and a digest of the
/// file's size and time (a rebuilt hub gets a new volume; the file is not read for it).
pub fn build_of(binary: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let meta = std::fs::metadata(binary)?;
    let modified = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let digest = sha2::Sha256::digest(format!("{}:{}", meta.len(), modified.as_nanos()));
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{}-{hex}", env!("CARGO_PKG_VERSION")))
}

/// Makes sure the engine has the volume of `build` holding `binary`; returns its name. It is
/// filled through a container of `image` made for the purpose (never started, always
/// removed).
pub async fn ensure(
    docker: &Docker,
    endpoint: &str,
    binary: &Path,
    build: &str,
    image: &str,
) -> HubResult<String> {
    let name = volume_name(build);
    let err = |e| docker_error(endpoint, e);
    if docker.inspect_volume(&name).await.is_err() {
        let labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_BINARY.to_string(), build.to_string()),
        ]);
        docker
            .create_volume(bollard::models::VolumeCreateRequest {
                name: Some(name.clone()),
                labels: Some(labels),
                ..Default::default()
            })
            .await
            .map_err(err)?;
    }
    let filler = make_filler(docker, &name, image).await.map_err(err)?;
    let filled = fill(docker, &filler, binary).await;
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(&filler, Some(options)).await;
    filled.map_err(|e| match e {
        Fill::Docker(e) => err(e),
        Fill::Local(e) => HubError::Internal {
            message: format!("cannot read the hub's executable {}: {e}", binary.display()),
        },
    })?;
    Ok(name)
}

/// A container of `image` with the volume `name` at [`DIR_IN_CONTAINER`], made and not started.
async fn make_filler(
    docker: &Docker,
    name: &str,
    image: &str,
) -> Result<String, bollard::errors::Error> {
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(vec!["true".into()]),
        cmd: Some(Vec::new()),
        labels: Some(HashMap::from([(
            LABEL_MANAGED.to_string(),
            "true".to_string(),
        )])),
        host_config: Some(HostConfig {
            binds: Some(vec![format!("{name}:{DIR_IN_CONTAINER}")]),
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().build();
    Ok(docker.create_container(Some(options), body).await?.id)
}

enum Fill {
    Docker(bollard::errors::Error),
    Local(std::io::Error),
}

/// Puts the executable into the volume unless it is whole already (then says nothing).
async fn fill(docker: &Docker, filler: &str, binary: &Path) -> Result<(), Fill> {
    let marker = format!("{DIR_IN_CONTAINER}/{COMPLETE}");
    let whole = archive::get(docker, filler, &marker, Read::Names)
        .await
        .map_err(Fill::Docker)?;
    if whole.is_some() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let file = tokio::fs::File::open(binary).await.map_err(Fill::Local)?;
    let size = file.metadata().await.map_err(Fill::Local)?.len();
    let tar = executable_tar(file, size).map_err(Fill::Local)?;
    let options = bollard::query_parameters::UploadToContainerOptions {
        path: DIR_IN_CONTAINER.to_string(),
        ..Default::default()
    };
    docker
        .upload_to_container(filler, Some(options), bollard::body_try_stream(tar))
        .await
        .map_err(Fill::Docker)?;
    archive::put(
        docker,
        filler,
        DIR_IN_CONTAINER,
        &[Entry::file(COMPLETE, "")],
    )
    .await
    .map_err(Fill::Docker)?;
    tracing::info!(
        bytes = size,
        ms = started.elapsed().as_millis() as u64,
        "the hub's executable is on the engine"
    );
    Ok(())
}

/// A tar stream of one executable file [`FILE_NAME`] of `size` bytes read from `file`.
fn executable_tar(
    file: tokio::fs::File,
    size: u64,
) -> std::io::Result<impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static> {
    let mut header = tar::Header::new_gnu();
    header.set_path(FILE_NAME)?;
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o755);
    header.set_size(size);
    header.set_mtime(0);
    header.set_cksum();
    let padding = (512 - size % 512) % 512;
    let head = Bytes::copy_from_slice(header.as_bytes());
    // The file's bytes, exactly `size` of them (a file that changes meanwhile cannot make a
    // tar the engine misreads), then the padding and the archive's two empty blocks.
    let body = tokio_util::io::ReaderStream::new(tokio::io::AsyncReadExt::take(file, size));
    let tail = Bytes::from(vec![0u8; padding as usize + 1024]);
    Ok(futures_util::stream::once(async move { Ok(head) })
        .chain(body)
        .chain(futures_util::stream::once(async move { Ok(tail) })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_executable_is_a_tar_that_reads_back_whole() {
        let dir = std::env::temp_dir().join(format!("agent-hub-bin-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x");
        let bytes: Vec<u8> = (0..1300u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let tar: Vec<u8> = rt.block_on(async {
            let file = tokio::fs::File::open(&path).await.unwrap();
            let stream = executable_tar(file, bytes.len() as u64).unwrap();
            let chunks: Vec<_> = stream.collect().await;
            chunks
                .into_iter()
                .flat_map(|c| c.unwrap().to_vec())
                .collect()
        });
        assert_eq!(tar.len() % 512, 0);
        let files = archive::read_tar(tar.as_slice(), Read::Contents(4096)).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, FILE_NAME);
        assert_eq!(files[0].mode, 0o755);
        assert_eq!(files[0].bytes, bytes);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_build_names_a_volume_docker_takes() {
        assert_eq!(
            volume_name("0.1.0-ab12cd34"),
            "agent-hub-bin-0.1.0-ab12cd34"
        );
        assert_eq!(volume_name("0.1.0+x/y"), "agent-hub-bin-0.1.0-x-y");
    }
}
