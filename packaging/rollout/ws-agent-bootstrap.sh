#!/bin/sh
# Installs ws-agent in a running guest from the site's package repository and keeps it upgraded:
# the one-shot command for VMs that already exist (docs/rollout.md). Runs as root in the guest,
# delivered by the QEMU guest agent (guest-exec with the script on stdin), SSH or a console.
#
#   sh ws-agent-bootstrap.sh --repo URL [--suite stable] [--key-fingerprint FPR]
#
# apt guests (Debian, Ubuntu): URL is the apt repository scripts/build-apt-repo.mjs laid out; its
#   ws-archive-keyring.gpg becomes the source's Signed-By, and unattended-upgrades (when present)
#   is told to upgrade origin "ws".
# dnf guests (Fedora, CentOS Stream, Rocky, RHEL): URL is the directory holding the rpm repository
#   (createrepo_c output, with RPM-GPG-KEY-ws); dnf-automatic (when present) upgrades it.
# Idempotent: a second run changes nothing but upgrades ws-agent to the newest version.
set -eu

repo=""
suite="stable"
fingerprint=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repo) repo="${2:?--repo needs a URL}"; shift 2 ;;
    --suite) suite="${2:?--suite needs a name}"; shift 2 ;;
    --key-fingerprint) fingerprint="${2:?--key-fingerprint needs a fingerprint}"; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "ws-agent-bootstrap: unknown argument: $1" >&2; exit 2 ;;
  esac
done
case "$repo" in
  https://* | http://* | file:///*) ;;
  *) echo "ws-agent-bootstrap: --repo must be an http(s):// or file:/// URL" >&2; exit 2 ;;
esac
case "$suite" in
  *[!a-z0-9.-]* | "") echo "ws-agent-bootstrap: --suite must be a plain name" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "ws-agent-bootstrap: run as root" >&2; exit 1; }

fetch() { # URL DEST
  if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then wget -q -O "$2" "$1"
  else echo "ws-agent-bootstrap: neither curl nor wget is installed" >&2; exit 1
  fi
}

check_fingerprint() { # KEYFILE
  [ -n "$fingerprint" ] || return 0
  command -v gpg >/dev/null 2>&1 || { echo "ws-agent-bootstrap: --key-fingerprint needs gpg in the guest" >&2; exit 1; }
  if ! gpg --show-keys --with-colons "$1" 2>/dev/null | grep '^fpr:' | cut -d: -f10 | grep -qix "$fingerprint"; then
    echo "ws-agent-bootstrap: the repository key is not $fingerprint: refusing it" >&2
    exit 1
  fi
}

if command -v apt-get >/dev/null 2>&1; then
  keyring=/usr/share/keyrings/ws-archive-keyring.gpg
  fetch "$repo/ws-archive-keyring.gpg" "$keyring.new"
  check_fingerprint "$keyring.new"
  mv "$keyring.new" "$keyring"
  chmod 0644 "$keyring"
  cat >/etc/apt/sources.list.d/ws.sources <<SOURCES
Types: deb
URIs: $repo
Suites: $suite
Components: main
Signed-By: $keyring
SOURCES
  if [ -d /etc/apt/apt.conf.d ]; then
    cat >/etc/apt/apt.conf.d/51ws-agent-upgrades <<'UPGRADES'
// ws-agent from the site's repository (origin "ws") is upgraded like security updates.
Unattended-Upgrade::Origins-Pattern { "origin=ws"; };
UPGRADES
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -o Dpkg::Options::=--force-confold ws-agent
elif command -v dnf >/dev/null 2>&1; then
  keyfile=/etc/pki/rpm-gpg/RPM-GPG-KEY-ws
  mkdir -p /etc/pki/rpm-gpg
  fetch "$repo/RPM-GPG-KEY-ws" "$keyfile.new"
  check_fingerprint "$keyfile.new"
  mv "$keyfile.new" "$keyfile"
  cat >/etc/yum.repos.d/ws.repo <<REPO
[ws]
name=ws in-guest agent
baseurl=$repo
enabled=1
gpgcheck=1
repo_gpgcheck=0
gpgkey=file://$keyfile
REPO
  dnf install -y ws-agent
else
  echo "ws-agent-bootstrap: neither apt-get nor dnf found: install the package or the single executable by hand (docs/install.md)" >&2
  exit 1
fi

systemctl enable ws-agent.service >/dev/null 2>&1 || true
systemctl restart --no-block ws-agent.service || true
ws-agent version
