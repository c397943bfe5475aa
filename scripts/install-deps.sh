#!/usr/bin/env bash
# Installs the Debian packages Sailor needs. Idempotent: runs apt-get only when something is
# missing, and then `apt-get update` once first. Takes well under a second when all is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libcaf-dev libtorch-dev libucx-dev ucx-utils capnproto libcapnp-dev
  libspdlog-dev doctest-dev libgloo-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libopenblas0-pthread python3-torch iproute2 util-linux libcpp-httplib-dev libssl-dev zlib1g-dev
  # a text job's SentencePiece tokenizer (its runtime library, libsentencepiece0, comes with it)
  libsentencepiece-dev
  # scripts/make-tls-certs.sh (TLS files for a job, and the TLS tests)
  openssl
  # `make demo`'s text: the English quotes in /usr/share/games/fortunes (about 100 kB)
  fortunes-min
  # the dashboard's browser test (headless Chromium: about 25 s and 280 MB)
  chromium-headless-shell
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
