// A root tree that looks like an Ubuntu cloud VM after its first boot, built from real parts:
// host keys made by the real ssh-keygen, netplan files rendered by the real cloud-init
// (fixtures/seal/netplan), cloud-init's own configuration and program, this machine's
// machine-id, the /var/lib/cloud layout cloud-init leaves (with its absolute instance symlink).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, copyFile, lstat, mkdir, readdir, readFile, readlink, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
export const sealFixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/seal");

export interface TreeOptions {
  /** Adds cloud.cfg.d/99-disable-network-config.cfg: cloud-init will not write network config. */
  networkConfigDisabled?: boolean;
  /** A directory outside the tree that symlinks inside point at; sealing must not touch it. */
  outside: string;
}

async function put(root: string, imagePath: string, content: string | Buffer, mode = 0o644): Promise<void> {
  const file = path.join(root, imagePath);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, content, { mode });
}

async function link(root: string, imagePath: string, target: string): Promise<void> {
  const file = path.join(root, imagePath);
  await mkdir(path.dirname(file), { recursive: true });
  await symlink(target, file);
}

async function copyInto(root: string, hostFile: string, imagePath: string, mode?: number): Promise<void> {
  const file = path.join(root, imagePath);
  await mkdir(path.dirname(file), { recursive: true });
  await copyFile(hostFile, file);
  if (mode !== undefined) await chmod(file, mode);
}

async function requireHostFile(file: string, debianPackage: string): Promise<void> {
  try {
    await lstat(file);
  } catch {
    throw new Error(`${file} is missing: install the Debian package ${debianPackage}`);
  }
}

export const INSTANCE_ID = "iid-ws-golden-0001";

export async function buildUbuntuCloudTree(root: string, options: TreeOptions): Promise<void> {
  await requireHostFile("/usr/bin/ssh-keygen", "openssh-client");
  await requireHostFile("/usr/bin/cloud-init", "cloud-init");
  await requireHostFile("/etc/cloud/cloud.cfg", "cloud-init");

  // Identity: this machine's real machine-id, and real host keys made for the tree.
  await copyInto(root, "/etc/machine-id", "/etc/machine-id", 0o444);
  await copyInto(root, "/etc/machine-id", "/var/lib/dbus/machine-id");
  await mkdir(path.join(root, "etc/ssh"), { recursive: true });
  await run("ssh-keygen", ["-A", "-f", root]);
  await put(root, "/etc/ssh/sshd_config.d/50-cloud-init.conf", "PasswordAuthentication no\n", 0o600);

  // cloud-init: program, configuration, the netplan file it rendered, state, logs, seed.
  await copyInto(root, "/usr/bin/cloud-init", "/usr/bin/cloud-init", 0o755);
  await copyInto(root, path.join(sealFixtures, "cloud/cloud.cfg"), "/etc/cloud/cloud.cfg");
  await copyInto(root, path.join(sealFixtures, "cloud/05_logging.cfg"), "/etc/cloud/cloud.cfg.d/05_logging.cfg");
  if (options.networkConfigDisabled) {
    await copyInto(
      root,
      path.join(sealFixtures, "cloud/99-disable-network-config.cfg"),
      "/etc/cloud/cloud.cfg.d/99-disable-network-config.cfg",
    );
  }
  await copyInto(root, path.join(sealFixtures, "netplan/50-cloud-init.yaml"), "/etc/netplan/50-cloud-init.yaml", 0o600);
  await copyInto(root, path.join(sealFixtures, "netplan/01-builder.yaml"), "/etc/netplan/01-builder.yaml", 0o600);
  const instance = `/var/lib/cloud/instances/${INSTANCE_ID}`;
  await put(root, `${instance}/boot-finished`, "1042.17 - Mon, 24 Nov 2025 09:12:44 +0000 - v. 22.4.2\n");
  await put(root, `${instance}/datasource`, "DataSourceNoCloud: DataSourceNoCloud [seed=/dev/vdb][dsmode=net]\n");
  await put(root, `${instance}/user-data.txt`, "#cloud-config\nhostname: golden\n", 0o600);
  await put(root, `${instance}/cloud-config.txt`, "#cloud-config\nhostname: golden\n", 0o600);
  await put(root, `${instance}/obj.pkl`, Buffer.from([0x80, 0x04, 0x95, 0x00, 0x2e]), 0o600);
  await put(root, `${instance}/sem/config_ssh`, "2025-11-24 09:12:40.123456\n");
  await put(root, `${instance}/sem/config_set_hostname`, "2025-11-24 09:12:40.234567\n");
  await link(root, "/var/lib/cloud/instance", instance);
  await put(root, "/var/lib/cloud/data/instance-id", `${INSTANCE_ID}\n`);
  await put(root, "/var/lib/cloud/data/previous-instance-id", `${INSTANCE_ID}\n`);
  await put(root, "/var/lib/cloud/data/result.json", '{"v1": {"datasource": "DataSourceNoCloud", "errors": []}}\n');
  await put(root, "/var/lib/cloud/data/status.json", '{"v1": {"stage": null}}\n');
  await put(root, "/var/lib/cloud/sem/config_scripts_per_once.once", "2025-11-24 09:12:44.1\n");
  await mkdir(path.join(root, "var/lib/cloud/scripts/per-boot"), { recursive: true });
  await mkdir(path.join(root, "var/lib/cloud/handlers"), { recursive: true });
  await put(root, "/var/lib/cloud/seed/nocloud/meta-data", "instance-id: golden\n");
  await put(
    root,
    "/var/log/cloud-init.log",
    "2025-11-24 09:12:40,001 - util.py[DEBUG]: Cloud-init v. 22.4.2 running 'init-local'\n",
  );
  await put(root, "/var/log/cloud-init-output.log", "Cloud-init v. 22.4.2 finished\n");

  // systemd: Debian's ssh.service (which makes no host keys), journal, random seed.
  if ((await lstat("/lib/systemd/system/ssh.service").catch(() => null)) === null) {
    throw new Error("/lib/systemd/system/ssh.service is missing: install the Debian package openssh-server");
  }
  await copyInto(root, "/lib/systemd/system/ssh.service", "/lib/systemd/system/ssh.service");
  await mkdir(path.join(root, "etc/systemd/system/multi-user.target.wants"), { recursive: true });
  await link(root, "/etc/systemd/system/multi-user.target.wants/ssh.service", "/lib/systemd/system/ssh.service");
  const machineId = (await readFile("/etc/machine-id", "utf8")).trim();
  await put(root, `/var/log/journal/${machineId}/system.journal`, Buffer.alloc(4096, 0x4c));
  await put(root, "/var/lib/systemd/random-seed", Buffer.alloc(512, 0x5a), 0o600);
  await put(root, "/var/lib/systemd/credential.secret", Buffer.alloc(32, 0x11), 0o400);

  // Logs, live and rotated, and a symlink that must not be followed.
  await put(root, "/var/log/syslog", "Nov 24 09:12:40 golden systemd[1]: Started ssh.service\n", 0o640);
  await put(root, "/var/log/auth.log", "Nov 24 09:20:01 golden sshd[812]: Accepted publickey for ubuntu\n", 0o640);
  await put(root, "/var/log/syslog.1", "older\n", 0o640);
  await put(root, "/var/log/syslog.2.gz", Buffer.from([0x1f, 0x8b, 0x08, 0x00]), 0o640);
  await put(root, "/var/log/apt/history.log", "Start-Date: 2025-11-24  09:30:00\n");
  await put(root, "/var/log/wtmp", Buffer.alloc(384, 0x01), 0o664);
  await put(root, "/var/log/btmp", "", 0o660);
  await link(root, "/var/log/outside.log", path.join(options.outside, "sentinel.log"));

  // People: histories (one a symlink to /dev/null, as some images do), keys that stay.
  await put(root, "/root/.bash_history", "apt-get install -y nvidia-driver\n", 0o600);
  await put(root, "/root/.lesshst", ".less-history-file:\n", 0o600);
  await put(root, "/home/ubuntu/.bash_history", "sudo reboot\n", 0o600);
  await put(root, "/home/ubuntu/.python_history", "import torch\n", 0o600);
  await put(root, "/home/ubuntu/.local/share/fish/fish_history", "- cmd: ls\n", 0o600);
  await link(root, "/home/admin/.bash_history", "/dev/null");
  await put(
    root,
    "/home/ubuntu/.ssh/authorized_keys",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9tZXN0dWZm builder\n",
    0o600,
  );

  // tmp, the agent's state and config, DHCP leases.
  await put(root, "/tmp/build.log", "building\n");
  await put(root, "/tmp/pip-unpack-x1/wheel/METADATA", "Name: torch\n");
  await link(root, "/tmp/outside-dir", options.outside);
  await put(root, "/var/tmp/cloud-init/cloud-init-dhcp-abc/dhcp.leases", "lease {}\n");
  await put(root, "/var/lib/ws-agent/leases.json", '{"leases":[]}\n', 0o600);
  await put(root, "/var/lib/ws-agent/audit.log", "granted lease\n", 0o600);
  await put(root, "/etc/ws-agent/config.yaml", "collector: ws-collector.ws-system.svc:7443\n", 0o600);
  await put(root, "/var/lib/dhcp/dhclient.enp1s0.leases", 'lease { interface "enp1s0"; }\n');
}

/** Path, type, mode, owner, size, mtime and content (or link target) of everything in a tree. */
export async function hashTree(root: string): Promise<string> {
  const hash = createHash("sha256");
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const file = path.join(dir, name);
      const stats = await lstat(file);
      hash.update(
        `${path.relative(root, file)}\0${stats.mode}\0${stats.uid}:${stats.gid}\0${stats.size}\0${stats.mtimeMs}\0`,
      );
      if (stats.isSymbolicLink()) hash.update(await readlink(file));
      else if (stats.isFile()) hash.update(await readFile(file));
      else if (stats.isDirectory()) await walk(file);
      hash.update("\n");
    }
  };
  await walk(root);
  return hash.digest("hex");
}
