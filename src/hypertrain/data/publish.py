"""Publishing a prepared dataset to miners, and fetching it with every byte checked.

``hypertrain data serve`` serves exactly the files a dataset descriptor names
(``dataset.json``, the shards, the sample-hash file, and ``tokenizer.json`` when it is
there) read-only over HTTP. ``hypertrain data fetch`` downloads them into a local
directory, refuses a descriptor whose dataset root is not the one the run manifest
pins, checks each file's SHA-256 as it arrives and finally re-hashes the whole
dataset against its root, so a wrong or tampered mirror is never used.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import logging
import shutil
import threading
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME, DatasetDescriptor, read_descriptor
from hypertrain.data.errors import DataError

log = logging.getLogger(__name__)
TOKENIZER_FILE = "tokenizer.json"
CHUNK = 1 << 20


def published_files(descriptor: DatasetDescriptor) -> list[str]:
    """The file names a dataset consists of, descriptor first."""
    return [DESCRIPTOR_NAME, descriptor.sample_hashes.file, *(s.file for s in descriptor.shards)]


class _Handler(http.server.SimpleHTTPRequestHandler):
    allowed: frozenset[str] = frozenset()

    def do_GET(self) -> None:
        name = self.path.split("?", 1)[0].lstrip("/")
        if name not in self.allowed:
            self.send_error(404, "not part of this dataset")
            return
        super().do_GET()

    def list_directory(self, path: Any) -> None:
        self.send_error(404, "no listing")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


def make_server(directory: Path, host: str, port: int) -> http.server.ThreadingHTTPServer:
    """A server for the dataset in ``directory`` (checked against its root first)."""
    dataset = Dataset(directory / DESCRIPTOR_NAME)
    files = set(published_files(dataset.descriptor))
    if (directory / TOKENIZER_FILE).is_file():
        files.add(TOKENIZER_FILE)
    handler = type("DatasetHandler", (_Handler,), {"allowed": frozenset(files)})
    return http.server.ThreadingHTTPServer((host, port), partial(handler, directory=str(directory)))


def serve_in_thread(server: http.server.ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def _download(client: httpx.Client, url: str, path: Path, sha256: str | None) -> None:
    digest = hashlib.sha256()
    tmp = path.with_name(path.name + ".part")
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise DataError(f"{url} answered HTTP {response.status_code}")
            with tmp.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    except httpx.HTTPError as exc:
        raise DataError(f"cannot fetch {url}: {exc or type(exc).__name__}") from None
    if sha256 is not None and digest.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise DataError(f"{path.name} from {url} has SHA-256 {digest.hexdigest()}, not {sha256}")
    tmp.replace(path)


def fetch_dataset(
    url: str, out_dir: Path, *, dataset_root: str, descriptor_sha256: str | None = None
) -> Dataset:
    """Download a published dataset into ``out_dir`` and prove it is ``dataset_root``."""
    base = url.rstrip("/")
    out_dir.mkdir(parents=True, exist_ok=True)
    with httpx.Client(timeout=60, follow_redirects=False) as client:
        _download(client, f"{base}/{DESCRIPTOR_NAME}", out_dir / DESCRIPTOR_NAME, None)
        try:
            descriptor = read_descriptor(out_dir / DESCRIPTOR_NAME, descriptor_sha256)
        except ValueError as exc:
            (out_dir / DESCRIPTOR_NAME).unlink(missing_ok=True)
            raise DataError(f"the published descriptor is refused: {exc}") from None
        if descriptor.dataset_root != dataset_root:
            (out_dir / DESCRIPTOR_NAME).unlink(missing_ok=True)
            raise DataError(
                f"the published dataset has root {descriptor.dataset_root},"
                f" the run pins {dataset_root}"
            )
        _download(
            client,
            f"{base}/{descriptor.sample_hashes.file}",
            out_dir / descriptor.sample_hashes.file,
            descriptor.sample_hashes.sha256,
        )
        for shard in descriptor.shards:
            _download(client, f"{base}/{shard.file}", out_dir / shard.file, shard.sha256)
        tok = client.get(f"{base}/{TOKENIZER_FILE}")
        good = hashlib.sha256(tok.content).hexdigest() == descriptor.tokenizer_sha256
        if tok.status_code == 200 and good:  # a wrong tokenizer is simply not kept
            (out_dir / TOKENIZER_FILE).write_bytes(tok.content)
    dataset = Dataset(out_dir / DESCRIPTOR_NAME)
    dataset.verify()
    return dataset


def pinned_by_manifest(url: str, coordinator: str | None) -> tuple[str, str]:
    """(dataset root, descriptor SHA-256) from the signed manifest the service serves."""
    from hypertrain.protocol.envelope import open_envelope

    try:
        response = httpx.get(url, timeout=30)
        envelope = response.json()
    except httpx.HTTPError as exc:
        raise DataError(
            f"cannot fetch the manifest at {url}: {exc or type(exc).__name__}"
        ) from None
    except ValueError:
        raise DataError(f"{url} answered HTTP {response.status_code} without JSON") from None
    verified = open_envelope(envelope, domain="manifest")
    if coordinator and verified.signer != coordinator:
        raise DataError(f"the manifest is signed by {verified.signer}, not {coordinator}")
    data = verified.envelope.body["manifest"]["data"]
    return str(data["dataset_root"]), str(data["descriptor_sha256"])


def copy_tokenizer(tokenizer: Path, dataset_dir: Path) -> None:
    """Put the run's tokenizer next to the dataset, so ``serve`` publishes it too."""
    shutil.copyfile(tokenizer, dataset_dir / TOKENIZER_FILE)


def ready_doc(server: http.server.ThreadingHTTPServer, root: str) -> str:
    host, port = server.server_address[:2]
    return json.dumps({"url": f"http://{host!s}:{port}", "dataset_root": root})
