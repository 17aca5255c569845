// The leases signal for `ws-agent probe`: what the running agent has stored,
// read without touching it (no socket, no moving a bad file aside).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { absent, errorMessage, failed, ok, type Signal } from "../signals/types.js";
import { isHolding, leaseOnWire, restoredLease } from "./leases.js";
import { LEASE_FILE, parseLeaseState } from "./store.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LeaseSignalSchema } from "@ws/protocol";

export function createStoredLeasesSignal(): Signal<MessageInitShape<typeof LeaseSignalSchema>> {
  return {
    name: "leases",
    async collect(ctx) {
      const file = path.join(ctx.roots.state, LEASE_FILE);
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT")
          return absent(`no ${file}: no lease was ever taken here`);
        return failed(`${file}: ${errorMessage(error)}`);
      }
      const parsed = parseLeaseState(text);
      if (!parsed.ok) return failed(`${file}: ${parsed.error}`);
      const now = { wallMs: ctx.clock.nowMs(), monoMs: ctx.clock.monotonicMs() };
      const leases = parsed.state.leases
        .map((stored) => restoredLease(stored, now))
        .filter((lease) => isHolding(lease, now));
      return ok({ leases: leases.map((lease) => leaseOnWire(lease, now)) });
    },
  };
}
