#!/usr/bin/python3
"""An image as an OCI image layout archive (a registry takes it: `skopeo copy
oci-archive:FILE docker://REGISTRY/NAME:TAG`, `crane push`, `ctr images import`).

  oci_archive.py convert DOCKER_SAVE.tar OCI.tar REPO:TAG   from the output of `docker save`
  oci_archive.py check OCI.tar                              every blob named by its digest,
                                                            index -> manifest -> config, layers

`docker save` of Docker before 25 writes its own layout (manifest.json, <id>.json,
<dir>/layer.tar); the layers are the uncompressed tars whose digests the config's
rootfs.diff_ids already name, so the conversion only re-files them as OCI blobs.
"""
import hashlib
import io
import json
import sys
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"


def _add(out, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    out.addfile(info, io.BytesIO(data))


def _blob(out, data, seen):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest not in seen:
        seen.add(digest)
        _add(out, "blobs/sha256/" + digest[7:], data)
    return {"digest": digest, "size": len(data)}


def convert(src, dst, ref):
    if ":" not in ref.rsplit("/", 1)[-1]:
        sys.exit(f"oci_archive: {ref}: want REPO:TAG")
    with tarfile.open(src) as tin, tarfile.open(dst, "w") as out:
        names = tin.getnames()
        if "manifest.json" not in names:
            sys.exit(f"oci_archive: {src} is not the output of docker save (no manifest.json)")
        images = json.load(tin.extractfile("manifest.json"))
        if len(images) != 1:
            sys.exit(f"oci_archive: {src} holds {len(images)} images, want 1")
        seen = set()
        config = tin.extractfile(images[0]["Config"]).read()
        layers = [dict(mediaType=LAYER, **_blob(out, tin.extractfile(l).read(), seen))
                  for l in images[0]["Layers"]]
        diff_ids = json.loads(config)["rootfs"]["diff_ids"]
        if [l["digest"] for l in layers] != diff_ids:
            sys.exit("oci_archive: the layers' digests are not the config's diff_ids")
        manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST,
                               "config": dict(mediaType=CONFIG, **_blob(out, config, seen)),
                               "layers": layers}).encode()
        index = {"schemaVersion": 2, "manifests": [dict(
            mediaType=MANIFEST, **_blob(out, manifest, seen),
            annotations={"org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1],
                         "io.containerd.image.name": ref})]}
        _add(out, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _add(out, "index.json", json.dumps(index).encode())


def check(path):
    with tarfile.open(path) as t:
        blobs = {}
        for m in t.getmembers():
            if m.name.startswith("blobs/sha256/") and m.isfile():
                data = t.extractfile(m).read()
                if hashlib.sha256(data).hexdigest() != m.name[13:]:
                    sys.exit(f"oci_archive: {m.name} does not match its digest")
                blobs["sha256:" + m.name[13:]] = data
        if json.load(t.extractfile("oci-layout"))["imageLayoutVersion"] != "1.0.0":
            sys.exit("oci_archive: oci-layout version")
        refs = []
        for d in json.load(t.extractfile("index.json"))["manifests"]:
            manifest = json.loads(blobs[d["digest"]])
            for x in [manifest["config"]] + manifest["layers"]:
                if x["digest"] not in blobs or len(blobs[x["digest"]]) != x["size"]:
                    sys.exit(f"oci_archive: {x['digest']} missing or of another size")
            refs.append(d["annotations"]["io.containerd.image.name"])
    print(f"oci_archive: {path}: {', '.join(refs)}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "convert":
        convert(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        sys.exit(__doc__)
