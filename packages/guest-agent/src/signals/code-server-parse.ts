/**
 * The pure half of the code-server signal (code-server.ts reads): what one heartbeat file says, as the report carries it. Tested on fixtures.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CodeServerInstanceSchema } from "@ws/protocol";
import type { Users } from "../users.js";

export type InstanceInit = MessageInitShape<typeof CodeServerInstanceSchema>;

export interface HeartbeatFileStat {
  uid: number;
  mtimeMs: number;
}

/** What one heartbeat file says, as the report carries it. Pure. */
export function heartbeatInstance(file: string, stat: HeartbeatFileStat, users: Users, nowMs: number): InstanceInit {
  return {
    user: users.byUid(stat.uid)?.name ?? "",
    uid: stat.uid,
    heartbeatFile: file,
    heartbeatAgeSeconds: Math.max(0, (nowMs - stat.mtimeMs) / 1000),
  };
}
