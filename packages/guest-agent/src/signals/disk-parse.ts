/**
 * The pure half of the disk signal (disk.ts reads): a mount's blocks → the report's mount usage. Tested on fixtures.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { MountSchema } from "@ws/protocol";
import type { MountEntry } from "./proc-mounts.js";

export type MountInit = MessageInitShape<typeof MountSchema>;

/** What statfs(2) says, in blocks of `bsize` bytes. */
export interface FilesystemBlocks {
  bsize: bigint;
  blocks: bigint;
  bfree: bigint;
  bavail: bigint;
}

/**
 * A Mount from statfs numbers, with df's meaning: used = total − free; available
 * is what an unprivileged user can still write (free less the root reserve), so
 * used + available can be less than the size. Pure.
 */
export function mountUsage(mountPoint: string, entry: MountEntry | undefined, blocks: FilesystemBlocks): MountInit {
  return {
    mountPoint,
    device: entry?.device ?? "",
    fsType: entry?.fsType ?? "",
    sizeBytes: blocks.blocks * blocks.bsize,
    usedBytes: (blocks.blocks - blocks.bfree) * blocks.bsize,
    availableBytes: blocks.bavail * blocks.bsize,
  };
}
