/**
 * The capabilities growing needs. Root in a container or sandbox often lacks CAP_SYS_RESOURCE,
 * and ext4's online resize ioctl answers EPERM without it: better said before than after.
 */
export interface GrowCapabilities {
  /** BLKPG partition updates, xfs and btrfs growth. */
  sysAdmin: boolean;
  /** ext4 online resize (EXT4_IOC_RESIZE_FS). */
  sysResource: boolean;
}

const CAP_SYS_ADMIN = 21n;
const CAP_SYS_RESOURCE = 24n;

/** Reads CapEff from /proc/<pid>/status text. Pure; an unreadable status grants nothing. */
export function parseEffectiveCapabilities(statusText: string): GrowCapabilities {
  const match = /^CapEff:\s*([0-9a-fA-F]+)\s*$/m.exec(statusText);
  if (!match) return { sysAdmin: false, sysResource: false };
  const mask = BigInt(`0x${match[1]}`);
  const has = (bit: bigint) => ((mask >> bit) & 1n) === 1n;
  return { sysAdmin: has(CAP_SYS_ADMIN), sysResource: has(CAP_SYS_RESOURCE) };
}
