#!/usr/bin/env bash
# Installs staticlm's build and test dependencies from Debian 12 packages. Idempotent: installs
# only what is missing, so re-running is cheap.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config
      libhwy-dev libflatbuffers-dev flatbuffers-compiler libsentencepiece-dev
      nlohmann-json3-dev libcli11-dev libxxhash-dev libpcre2-dev libicu-dev libyaml-cpp-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      openssh-client openssh-server)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
