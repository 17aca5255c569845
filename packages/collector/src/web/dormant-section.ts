// The fleet page's "Dormant workstations" section (issue 38 item 4): VMs stopped longer than
// dormant.after, how long, their disks and owner. ws never deletes them: the section says where
// a site's own archive step starts (docs/policy.md, "Dormant workstations"). Pure.
import { type DormantVm, formatBytes, stoppedDays } from "../outreach/dormant/report.js";
import { escapeHtml } from "./html.js";

export function dormantSection(vms: readonly DormantVm[] | undefined, nowMs: number): string {
  if (vms === undefined) return "";
  const total = vms.reduce((sum, vm) => sum + vm.bytes, 0);
  const rows = vms
    .map((vm) => {
      const disks =
        vm.disks
          .map(
            (disk) =>
              `${escapeHtml(disk.claim)} ${disk.bytes === null ? "size unknown" : formatBytes(disk.bytes)}${disk.storageClass ? ` <small>(${escapeHtml(disk.storageClass)})</small>` : ""}`,
          )
          .join("<br>") || "no PVC";
      const reminded =
        vm.notifiedMs === null ? "not yet" : `${Math.floor((nowMs - vm.notifiedMs) / 86_400_000)} day(s) ago`;
      return `<tr data-dormant="${escapeHtml(`${vm.namespace}/${vm.name}`)}"><td>${escapeHtml(vm.namespace)}/${escapeHtml(vm.name)}</td><td>${escapeHtml(vm.owner ?? "—")}</td><td class="days">${stoppedDays(vm)}</td><td>${disks}</td><td class="bytes">${formatBytes(vm.bytes)}</td><td>${reminded}</td></tr>`;
    })
    .join("\n");
  return `<h2 id="dormant-heading">Dormant workstations</h2>
<p>Stopped longer than the configured time: their disks still fill the storage. ws reminds each owner once a period and never deletes or archives anything (<a href="api/dormant">/api/dormant</a>).</p>
<table id="dormant"><thead><tr><th>VM</th><th>Owner</th><th>Stopped (days)</th><th>Disks</th><th>Holds</th><th>Reminded</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="6">None: no VM has been stopped that long.</td></tr>'}
</tbody>${vms.length ? `<tfoot><tr><td colspan="4">${vms.length} VM(s)</td><td id="dormant-total">${formatBytes(total)}</td><td></td></tr></tfoot>` : ""}</table>`;
}
