#!/usr/bin/env bash
# Builds a ws golden image: installs the ws-agent package into an Ubuntu 24.04 cloud image (or,
# with --rpm, a dnf-based one: Fedora, CentOS Stream, Rocky, RHEL), verifies it, and seals it (ws-agent seal) so every VM cloned from it boots as a new machine
# that cloud-init configures.
#
# Three ways, pick one:
#
#   build.sh --ssh USER@HOST --deb ws-agent_<version>-1_all.deb [--ssh-option OPT]...
#       A running VM booted from the Ubuntu 24.04 cloud image: in KubeVirt, a VM whose
#       DataVolume imported noble-server-cloudimg-amd64.img (docs/install.md, step 1), reached
#       with `virtctl port-forward` or any SSH route. The package is installed over SSH, verified,
#       the login user's authorized_keys removed (the builder's key must not reach every VM), and
#       the script ends with `ws-agent seal --yes --poweroff`: the VM's disk, powered off, is the
#       golden image that workstation DataVolumes clone.
#
#   build.sh --local --deb ws-agent_<version>-1_all.deb
#       The same, run as root inside that VM (from its console, say).
#
#   build.sh --image noble-server-cloudimg-amd64.img --deb ws-agent_<version>-1_all.deb \
#            --output ws-golden.qcow2 [--size 20G]
#       Offline, with virt-customize (package libguestfs-tools): a copy of the cloud image is
#       customised and sealed with `ws-agent seal --yes` (no VM runs: nothing to power off).
#
# --rpm ws-agent-<version>-1.noarch.rpm instead of --deb: for dnf-based images (KubeVirt's own
# Fedora and CentOS Stream images, Rocky, RHEL); dnf installs it with nodejs (>= 18) from the
# image's repositories (RHEL 9: the nodejs:18 or :20 module stream).
#
# --no-seal installs and verifies only, leaving the machine as it is to look around; seal it
# afterwards with `sudo ws-agent seal --yes --poweroff`.
# The package's dependency nodejs (>= 18) comes from Ubuntu's archive (24.04 has 18.19).
# Exit status: 0 done; 1 a step failed (it is named); 2 usage error.
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

die() {
	echo "golden-image: $*" >&2
	exit 1
}

usage_error() {
	echo "golden-image: $* (see --help)" >&2
	exit 2
}

step() {
	echo "==> $*" >&2
}

mode=""
target=""
image=""
output=""
size=""
deb=""
rpm_file=""
seal=yes
ssh_options=(-o BatchMode=yes -o ConnectTimeout=20)

while [ $# -gt 0 ]; do
	case "$1" in
	--ssh | --image | --output | --size | --deb | --rpm | --ssh-option)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--ssh) mode=ssh target=$2 ;;
		--image) mode=image image=$2 ;;
		--output) output=$2 ;;
		--size) size=$2 ;;
		--deb) deb=$2 ;;
		--rpm) rpm_file=$2 ;;
		--ssh-option) ssh_options+=(-o "$2") ;;
		esac
		shift 2
		;;
	--local)
		mode=local
		shift
		;;
	--no-seal)
		seal=no
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument: $1" ;;
	esac
done

[ -n "$mode" ] || usage_error "give --ssh USER@HOST, --local or --image FILE"
[ -n "$deb" ] && [ -n "$rpm_file" ] && usage_error "give --deb or --rpm, not both"
[ -n "$deb" ] || [ -n "$rpm_file" ] || usage_error "--deb FILE (or --rpm FILE for dnf-based images) is required (build it with: npm run package:all)"
if [ -n "$rpm_file" ]; then
	[ -f "$rpm_file" ] || die "$rpm_file: no such file"
	command -v rpm >/dev/null || die "rpm is needed to read the package (Debian package rpm)"
	package=$(rpm -qp --queryformat '%{NAME}' "$rpm_file" 2>/dev/null) || die "$rpm_file is not an rpm"
	version=$(rpm -qp --queryformat '%{VERSION}-%{RELEASE}' "$rpm_file")
	deb=$rpm_file # the package file, whichever kind: copied and installed the same way
else
	[ -f "$deb" ] || die "$deb: no such file"
	command -v dpkg-deb >/dev/null || die "dpkg-deb is needed to read the package (Debian package dpkg)"
	package=$(dpkg-deb --field "$deb" Package 2>/dev/null) || die "$deb is not a Debian package"
	version=$(dpkg-deb --field "$deb" Version)
fi
[ "$package" = ws-agent ] || die "$deb is the package '$package', not ws-agent"
deb_name=$(basename "$deb")

# The steps that run on the image, as sh scripts taking their arguments as $1...: the same text
# for every mode, so what --local is tested with is what --ssh and --image run.

# $1: the package on the image. apt (a .deb) or dnf (an .rpm) resolves nodejs; apt's package
# lists are fetched only when needed. A package of the other kind than the image's manager is refused.
# shellcheck disable=SC2016 # expanded on the image
install_script='set -e
case "$1" in
*.rpm)
	command -v dnf >/dev/null || { echo "this image has no dnf: give the .deb (--deb) for apt-based images" >&2; exit 1; }
	dnf install -y -q "$1" ;;
*)
	command -v apt-get >/dev/null || { echo "this image has no apt-get: give the .rpm (--rpm) for dnf-based images" >&2; exit 1; }
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q "$1" || { apt-get update -q && apt-get install -y -q "$1"; } ;;
esac
rm -f "$1"'

# $1: the package version expected. Fails unless the agent is installed, answers, and its units
# are enabled. (The Debian revision "-N" is not the agent's; a Debian "~" pre-release is the
# agent's "-" pre-release.)
# shellcheck disable=SC2016 # expanded on the image
verify_script='set -e
expected="ws-agent $(printf "%s" "$1" | sed "s/-[^-]*$//; s/~/-/")"
actual=$(ws-agent version)
[ "$actual" = "$expected" ] || { echo "ws-agent version says \"$actual\", expected \"$expected\"" >&2; exit 1; }
[ "$(readlink -f /usr/bin/ws-lease)" = /usr/lib/ws-agent/ws-agent.cjs ] || { echo "/usr/bin/ws-lease is not the agent" >&2; exit 1; }
ws-lease --help >/dev/null
ws-agent probe >/dev/null
for unit in ws-agent.service ws-agent-grow.service ws-agent-grow.path; do
	state=$(systemctl is-enabled "$unit" || true)
	[ "$state" = enabled ] || { echo "$unit is $state, not enabled" >&2; exit 1; }
done
echo "verified: ws-agent $1 installed, probe works, units enabled"'

seal_done() {
	echo "sealed: $1 (ws-agent $version)" >&2
}

not_sealed() {
	echo "installed and verified, NOT sealed (--no-seal): seal with 'sudo ws-agent seal --yes --poweroff'" >&2
}

build_local() {
	[ "$(id -u)" -eq 0 ] || die "--local must run as root"
	local copy
	copy=$(mktemp --suffix=".${deb##*.}")
	cp "$deb" "$copy"
	chmod 0644 "$copy" # apt reads local packages as the _apt user
	step "installing ws-agent $version"
	sh -s -- "$copy" <<<"$install_script" || die "installing the package failed"
	step "verifying"
	sh -s -- "$version" <<<"$verify_script" || die "verification failed"
	if [ "$seal" = no ]; then
		not_sealed
		return
	fi
	step "sealing and powering off"
	ws-agent seal --yes --poweroff || die "ws-agent seal failed: this machine is NOT sealed"
	seal_done "this machine is powering off; its disk is the golden image"
}

build_over_ssh() {
	local remote_deb="/tmp/$deb_name"
	step "waiting for cloud-init to finish on $target (apt is busy until then)"
	ssh "${ssh_options[@]}" "$target" 'sudo cloud-init status --wait >/dev/null || true' || die "cannot reach $target over SSH"
	step "copying $deb_name"
	scp "${ssh_options[@]}" "$deb" "$target:$remote_deb" || die "copying the package failed"
	step "installing ws-agent $version (and nodejs from the image's archive)"
	# shellcheck disable=SC2029 # the path is meant to be expanded here
	ssh "${ssh_options[@]}" "$target" "sudo sh -s -- '$remote_deb'" <<<"$install_script" || die "installing the package failed"
	step "verifying"
	# shellcheck disable=SC2029 # the version is meant to be expanded here
	ssh "${ssh_options[@]}" "$target" "sudo sh -s -- '$version'" <<<"$verify_script" || die "verification failed"
	if [ "$seal" = no ]; then
		not_sealed
		return
	fi
	step "removing the key this script logged in with, sealing and powering off"
	# The builder's SSH key must not end up in every VM; the open session survives its removal.
	# The connection drops when the VM powers off: ssh then exits 255, which is the success case.
	local status=0
	ssh "${ssh_options[@]}" "$target" 'rm -f ~/.ssh/authorized_keys && sudo ws-agent seal --yes --poweroff' || status=$?
	if [ "$status" -ne 0 ] && [ "$status" -ne 255 ]; then
		die "ws-agent seal failed (exit $status): the image is NOT sealed"
	fi
	seal_done "$target is powering off; its disk is the golden image"
}

build_offline() {
	[ -f "$image" ] || die "$image: no such file"
	[ -n "$output" ] || usage_error "--output FILE is required with --image (the cloud image itself is not changed)"
	command -v virt-customize >/dev/null || die "virt-customize is not installed (package libguestfs-tools)"
	step "copying $image to $output"
	cp --sparse=always "$image" "$output"
	if [ -n "$size" ]; then
		command -v qemu-img >/dev/null || die "qemu-img is not installed (package qemu-utils)"
		# The partition and filesystem follow at first boot (cloud-init growpart, ws-agent grow).
		qemu-img resize "$output" "$size"
	fi
	local scripts
	scripts=$(mktemp -d)
	trap 'rm -rf "$scripts"' EXIT
	printf 'set -- %q\n%s\n' "/var/tmp/$deb_name" "$install_script" >"$scripts/install.sh"
	printf 'set -- %q\n%s\n' "$version" "$verify_script" >"$scripts/verify.sh"
	local seal_args=()
	[ "$seal" = yes ] && seal_args=(--run-command "ws-agent seal --yes")
	step "installing ws-agent $version and verifying inside $output"
	virt-customize --add "$output" \
		--copy-in "$deb:/var/tmp" \
		--run "$scripts/install.sh" \
		--run "$scripts/verify.sh" \
		"${seal_args[@]}" ||
		die "virt-customize failed: $output is NOT a golden image"
	if [ "$seal" = no ]; then
		not_sealed
	else
		seal_done "$output"
	fi
}

case "$mode" in
local) build_local ;;
ssh) build_over_ssh ;;
image) build_offline ;;
esac
