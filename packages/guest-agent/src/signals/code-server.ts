/**
 * code-server: it touches ~/.local/share/code-server/heartbeat about once a minute while a
 * browser has the editor open, whether or not anyone types. A fresh heartbeat therefore means
 * "connected" (weak evidence for the collector), never "working".
 */
import path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CodeServerSignalSchema } from "@ws/protocol";
import { UserPathError } from "../fs/user-file.js";
import { createHomeScan, type HomeScan } from "./home-scan.js";
import { absent, errorMessage, failed, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import { type InstanceInit, heartbeatInstance } from "./code-server-parse.js";

export type CodeServerSignalValue = MessageInitShape<typeof CodeServerSignalSchema>;

/** code-server's default data dir, relative to a home (its --user-data-dir default). */
export const HEARTBEAT_SEGMENTS = [".local", "share", "code-server", "heartbeat"] as const;
export const HEARTBEAT_PATH = path.join(...HEARTBEAT_SEGMENTS);

/** `homes`: shared with the Jupyter signal (createSignals), so homes are listed once per sample. */
export function createCodeServerSignal(homes: HomeScan = createHomeScan()): Signal<CodeServerSignalValue> {
  return {
    name: "code_server",
    async collect(ctx: SignalContext): Promise<SignalOutcome<CodeServerSignalValue>> {
      const { homes: listing, cache, nowMs } = await homes.sample(ctx);
      const { problems } = listing;
      const instances: InstanceInit[] = [];
      for (const home of listing.homes) {
        try {
          const found = await cache.statFile(
            { trusted: home.trusted, segments: [home.name, ...HEARTBEAT_SEGMENTS], signal: ctx.signal },
            nowMs,
          );
          if (found instanceof UserPathError) problems.push(found.message);
          else if (found !== undefined) instances.push(heartbeatInstance(found.path, found, ctx.users, nowMs));
        } catch (error) {
          problems.push(errorMessage(error));
        }
      }
      const message = problems.length > 0 ? problems.join("; ") : undefined;
      if (instances.length > 0) return ok({ instances }, message);
      if (message !== undefined) return failed(message);
      return absent("no code-server heartbeat in any home");
    },
  };
}
