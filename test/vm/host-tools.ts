// The host programs the VM tests drive, each with the Debian package that provides it
// (scripts/install-test-deps.sh installs them). A missing one fails the run naming its package.
import { existsSync } from "node:fs";

export const HOST_TOOLS = {
  debootstrap: { path: "/usr/sbin/debootstrap", pkg: "debootstrap" },
  chroot: { path: "/usr/sbin/chroot", pkg: "coreutils" },
  systemctl: { path: "/usr/bin/systemctl", pkg: "systemd" },
  sfdisk: { path: "/usr/sbin/sfdisk", pkg: "fdisk" },
  mkfsExt4: { path: "/usr/sbin/mkfs.ext4", pkg: "e2fsprogs" },
  qemu: { path: "/usr/bin/qemu-system-x86_64", pkg: "qemu-system-x86" },
  qemuImg: { path: "/usr/bin/qemu-img", pkg: "qemu-utils" },
  genisoimage: { path: "/usr/bin/genisoimage", pkg: "genisoimage" },
  ssh: { path: "/usr/bin/ssh", pkg: "openssh-client" },
  sshKeygen: { path: "/usr/bin/ssh-keygen", pkg: "openssh-client" },
  sshKeyscan: { path: "/usr/bin/ssh-keyscan", pkg: "openssh-client" },
} as const;

export type HostTool = keyof typeof HOST_TOOLS;

export function tool(name: HostTool): string {
  return HOST_TOOLS[name].path;
}

/** Throws one error naming every missing program and the Debian packages to install. */
export function requireHostTools(): void {
  const missing = Object.values(HOST_TOOLS).filter((t) => !existsSync(t.path));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((t) => t.pkg))];
  throw new Error(
    `the VM tests need ${missing.map((t) => t.path).join(", ")}: install the Debian package(s) ${packages.join(" ")} ` +
      `(scripts/install-test-deps.sh does)`,
  );
}

export function requireRoot(): void {
  if (process.getuid?.() !== 0)
    throw new Error("the VM tests build a disk image with debootstrap and chroot: run them as root");
}
