// Small helpers every page shares: escaping, times, one stylesheet, one layout.
// No external assets: everything a page needs is in the page.
import { escapeHtml, formatDuration } from "@ws/protocol";

// In @ws/protocol since the agent's desktop notifications need it too (their body is markup).
export { escapeHtml };

/**
 * Headers on every answer of ws's HTTP listeners (pages, start links, the wake listener): no type
 * sniffing, no Referer (links carry tokens), and never inside another site's frame, so a page that
 * frames the Start or Keep button cannot trick a click on it (docs/security.md, "Pages in another
 * site's frame"). Only `frame-ancestors`: the pages' inline style stays allowed.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy": "frame-ancestors 'none'",
};

/** "in 4m" / "3m ago" / "—". */
export const when = (ms: number | undefined, nowMs: number) =>
  ms === undefined
    ? "—"
    : ms >= nowMs
      ? `in ${formatDuration((ms - nowMs) / 1000)}`
      : `${formatDuration((nowMs - ms) / 1000)} ago`;

/** An absolute time people can compare with a clock, UTC. */
export const at = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC");

export const vmPath = (namespace: string, name: string) =>
  `/vm/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;

const STYLE = `
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;max-width:80rem}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #ddd;padding:.35rem .6rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#f4f4f4}th a{color:inherit}tr.StoppingPending{background:#fff4d6}tr.Stopping,tr.Stopped{background:#eee}tr.AgentLost{background:#fde2e2}
small,.muted{color:#666}.counted{color:#06622b;font-weight:600}.ignored{color:#777}
.box{border:1px solid #ddd;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}
.warn{background:#fff4d6;border-color:#e8c36a}.ok{background:#e6f4ea;border-color:#8cc79b}.bad{background:#fde2e2;border-color:#e79a9a}
button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem;cursor:pointer}
form.filters{margin:.5rem 0}form.filters select,form.filters input{margin-right:.6rem}
dl{display:grid;grid-template-columns:max-content auto;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0}
svg text{font-size:11px;fill:#555}
`;

export function page(title: string, body: string, options: { refreshSeconds?: number } = {}): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${options.refreshSeconds ? `<meta http-equiv="refresh" content="${options.refreshSeconds}">` : ""}
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style></head><body>
${body}
</body></html>
`;
}
