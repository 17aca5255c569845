#!/usr/bin/env bash
# Installs the real components the tests start (Debian packages). Idempotent.
# Run as root; elsewhere it prints the apt-get command to run.
set -euo pipefail

PACKAGES=(
  jupyter-server python3-ipykernel python3-terminado  # Jupyter signal tests (real server, kernels, terminals)
  openssl                               # self-signed certificates (Jupyter HTTPS, fake Kubernetes API TLS)
  openssh-server openssh-client         # SSH/tty signal tests (real sshd on loopback)
  prometheus                            # promtool + a real Prometheus for metrics tests
  cloud-init                            # seal tests read its --help and run clean
  util-linux fdisk e2fsprogs xfsprogs btrfs-progs cloud-guest-utils parted lvm2  # grow tests
  systemd dbus-daemon                   # systemd-analyze verify; a real logind for inhibitor tests
  prometheus-node-exporter              # bench/: the agent's cost is measured beside node_exporter
  debootstrap systemd-container         # packaging: a Debian root to install the .deb into, booted with systemd-nspawn
  shellcheck man-db                     # packaging: maintainer scripts, man pages
  lintian dpkg-dev                      # packaging: the .deb is lintian clean; dpkg-parsechangelog reads its changelog
  buildah                               # packaging: the collector image, built and run without a Docker daemon
  qemu-system-x86 qemu-utils genisoimage  # test:vm: boot the guest image (TCG), overlays and resizes, the cloud-init seed
  chromium                              # the collector's pages in a real browser (test/e2e/pages.test.ts, via playwright-core)
  rpm rpmlint                           # packaging: the .rpm built by rpmbuild, rpmlint clean, installed with rpm --root
  gpg curl                              # packaging: the signed apt repository, and the rollout bootstrap fetching from it
  nginx                                 # a real reverse proxy in front of the pages: the site's auth proxy stand-in
  procps
)

# kubectl renders the kustomize overlays. It is not a Debian package (the machine images ship
# it from Kubernetes' own repository), so it is checked, not installed.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-test-deps: kubectl is missing: install it (https://kubernetes.io/docs/tasks/tools/) for test/packaging/kubernetes.test.ts" >&2
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-test-deps: all Debian packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-deps: missing Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "install-test-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's postinst may start services we do not want running outside tests.
for svc in prometheus ssh prometheus-node-exporter nginx; do
  (command -v systemctl >/dev/null && systemctl stop "$svc" 2>/dev/null) || true
  (command -v service >/dev/null && service "$svc" stop >/dev/null 2>&1) || true
done
echo "install-test-deps: done"
