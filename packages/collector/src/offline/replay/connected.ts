// What was still connected when a stop was decided and why it did not hold the VM (a forward
// judged by its kernel, a page reloading itself): the weak readings a decision did not count.
// Replay prints them under each notice and stop, whatif under each stop.
import { SIGNALS } from "../../engine/signals.js";
import type { Explanation } from "../../engine/types.js";

export function uncountedConnections(explanation: Explanation): string[] {
  const details = explanation.readings
    .filter((reading) => !reading.counted && SIGNALS[reading.signal].kind === "connected")
    .map((reading) => `${reading.detail} (weak)`);
  return [...new Set(details)];
}
