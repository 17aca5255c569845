// The monthly reminder a dormant VM's owner gets, per webhook format (docs/notifications.md,
// "dormant"). Pure: the same targets as the VM's other messages (global, its profile's, its own
// annotation), a body of its own because it is about a stopped VM, not a transition.
import type { WebhookTarget } from "../notify/config.js";
import { ntfyTopic, PAYLOAD_VERSION } from "../notify/payloads.js";
import { type DormantVm, dormantText, stoppedDays } from "./report.js";

const iso = (ms: number) => new Date(ms).toISOString();

export function dormantTitle(vm: DormantVm): string {
  return `Workstation ${vm.namespace}/${vm.name} has been stopped for ${stoppedDays(vm)} days`;
}

/** The request one target gets; `startUrl`: the VM's start link, when notifications.publicUrl is set. */
export function dormantRequest(
  target: WebhookTarget,
  vm: DormantVm,
  nowMs: number,
  startUrl?: string,
): { url: string; body: string } {
  const text = `${dormantText(vm)}${startUrl ? ` Start it: ${startUrl}` : ""}`;
  switch (target.format) {
    case "json":
      return {
        url: target.url,
        body: JSON.stringify({
          version: PAYLOAD_VERSION,
          event: "dormant",
          vm: { namespace: vm.namespace, name: vm.name },
          owner: vm.owner ?? "",
          at: iso(nowMs),
          stoppedSince: iso(vm.stoppedSinceMs),
          stoppedDays: stoppedDays(vm),
          diskBytes: vm.bytes,
          disks: vm.disks,
          startUrl: startUrl ?? null,
          text,
        }),
      };
    case "slack":
      return { url: target.url, body: JSON.stringify({ text }) };
    case "ntfy": {
      const { root, topic } = ntfyTopic(target.url);
      return {
        url: root,
        body: JSON.stringify({
          topic,
          title: dormantTitle(vm),
          message: text,
          priority: 2,
          tags: ["floppy_disk"],
          ...(startUrl ? { actions: [{ action: "view", label: "Start it", url: startUrl }] } : {}),
        }),
      };
    }
  }
}
