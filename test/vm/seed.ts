/**
 * The cloud-init NoCloud seed a platform attaches to each VM: meta-data (instance id, host
 * name) and user-data (a user with an SSH key; the agent's config and token, as KubeVirt's
 * cloudInitNoCloud volume would carry them). renderSeed is pure; writeSeedImage makes the
 * ISO 9660 volume labelled "cidata" that cloud-init's NoCloud datasource looks for.
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { stringify } from "yaml";
import { execOk } from "./exec.js";
import { tool } from "./host-tools.js";

export interface SeedSpec {
  /** A new instance id makes cloud-init treat the boot as a new machine (a clone). */
  instanceId: string;
  hostname: string;
  user: { name: string; sshPublicKey: string };
  agent: {
    /** host:port as the guest reaches it (10.0.2.2 is the host's loopback under -netdev user). */
    collectorAddress: string;
    namespace: string;
    name: string;
    token: string;
  };
}

export interface Seed {
  metaData: string;
  userData: string;
}

export const AGENT_CONFIG_PATH = "/etc/ws-agent/config.yaml";
export const AGENT_TOKEN_PATH = "/etc/ws-agent/token";

export function agentConfigYaml(agent: SeedSpec["agent"]): string {
  return stringify({
    collector: { address: agent.collectorAddress, insecure: true },
    vm: { namespace: agent.namespace, name: agent.name },
    tokenFile: AGENT_TOKEN_PATH,
  });
}

export function renderSeed(spec: SeedSpec): Seed {
  const metaData = stringify({ "instance-id": spec.instanceId, "local-hostname": spec.hostname });
  const userData = {
    hostname: spec.hostname,
    manage_etc_hosts: "localhost",
    ssh_pwauth: false,
    users: [
      {
        name: spec.user.name,
        shell: "/bin/bash",
        lock_passwd: true,
        sudo: "ALL=(ALL) NOPASSWD:ALL",
        ssh_authorized_keys: [spec.user.sshPublicKey.trim()],
      },
    ],
    // The agent's grow unit is under test: cloud-init's own growpart and resizefs would grow
    // the disk at boot before it and hide whether it works.
    growpart: { mode: "off" },
    resize_rootfs: false,
    write_files: [
      { path: AGENT_CONFIG_PATH, permissions: "0644", content: agentConfigYaml(spec.agent) },
      { path: AGENT_TOKEN_PATH, permissions: "0600", content: `${spec.agent.token}\n` },
    ],
  };
  return { metaData, userData: `#cloud-config\n${stringify(userData)}` };
}

/** Writes the seed files and the "cidata" ISO made from them into `dir`; returns the ISO's path. */
export async function writeSeedImage(dir: string, seed: Seed): Promise<string> {
  const files = path.join(dir, "seed");
  await mkdir(files, { recursive: true });
  await writeFile(path.join(files, "meta-data"), seed.metaData);
  await writeFile(path.join(files, "user-data"), seed.userData);
  const iso = path.join(dir, "seed.iso");
  await execOk(tool("genisoimage"), [
    "-quiet",
    "-output",
    iso,
    "-volid",
    "cidata",
    "-joliet",
    "-rock",
    path.join(files, "user-data"),
    path.join(files, "meta-data"),
  ]);
  return iso;
}
