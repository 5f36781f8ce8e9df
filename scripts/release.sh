#!/usr/bin/env bash
# make release: build the fleet's binaries for linux/amd64, and ferry (cp,
# restore, status) for Linux, macOS and Windows on amd64 and arm64, with the
# version stamped in, write SHA256SUMS beside them, and, with RELEASE_LOCATION set
# (gs://BUCKET/PATH, `terraform output -raw release_location`), upload the
# folder to RELEASE_LOCATION/VERSION, where the VMs' start-up script fetches
# them. Set release_version = VERSION in Terraform to roll the fleet to it.
set -euo pipefail
version=${VERSION:?VERSION is empty}
case $version in
*/* | *' '*) echo "release: VERSION=$version: want a plain name like v0.3.0" >&2; exit 2 ;;
esac
out=dist/$version
rm -rf "$out"
mkdir -p "$out"
for bin in worker merger producer; do
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$out/$bin" "./cmd/$bin"
done
ferries=()
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
  os=${target%/*} arch=${target#*/}
  name=ferry-$os-$arch
  [[ $os == windows ]] && name+=.exe
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$out/$name" ./cmd/ferry
  ferries+=("$name")
done
(cd "$out" && sha256sum worker merger producer "${ferries[@]}" >SHA256SUMS)
echo "release: built $out"
cat "$out/SHA256SUMS"
if [[ -z ${RELEASE_LOCATION:-} ]]; then
  echo "release: RELEASE_LOCATION is empty; not uploading"
  exit 0
fi
case $RELEASE_LOCATION in
gs://*) ;;
*) echo "release: RELEASE_LOCATION=$RELEASE_LOCATION: want gs://BUCKET/PATH" >&2; exit 2 ;;
esac
dest=${RELEASE_LOCATION%/}/$version
# The binaries first, SHA256SUMS last: a VM that sees the sums sees the files.
gcloud storage cp "$out/worker" "$out/merger" "$out/producer" "${ferries[@]/#/$out/}" "$dest/"
gcloud storage cp "$out/SHA256SUMS" "$dest/"
echo "release: uploaded to $dest; set release_version = \"$version\" and terraform apply"
