// Just enough PromQL reading for tests: the metric names an expression selects,
// and the queries of a Grafana dashboard.

const KEYWORDS = new Set([
  "and",
  "or",
  "unless",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "offset",
  "bool",
  "inf",
  "nan",
  "atan2",
]);

/** Metric names selected by `expr` (sorted, unique). Function and aggregation names are not metrics. */
export function metricNamesIn(expr: string): string[] {
  let text = expr;
  text = text.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, " "); // strings
  text = text.replace(/\{[^}]*\}/g, " "); // label matchers
  text = text.replace(/\[[^\]]*\]/g, " "); // ranges and subqueries
  text = text.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " "); // label lists
  text = text.replace(/(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?((ms|[smhdwy])(\d+(ms|[smhdwy]))*)?/g, " "); // numbers and durations
  const names = new Set<string>();
  for (const match of text.matchAll(/([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = match;
    if (!name || call || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names].sort();
}

interface Panel {
  title?: string;
  targets?: Array<{ expr?: string }>;
  panels?: Panel[];
}

/** Every query of a dashboard: its panels' targets, and its annotations (as "annotation NAME"). */
export function dashboardQueries(dashboard: {
  panels: Panel[];
  annotations?: { list?: Array<{ name?: string; expr?: string }> };
}): Array<{ panel: string; expr: string }> {
  const out: Array<{ panel: string; expr: string }> = [];
  for (const annotation of dashboard.annotations?.list ?? [])
    if (annotation.expr) out.push({ panel: `annotation ${annotation.name ?? "(unnamed)"}`, expr: annotation.expr });
  const visit = (panels: Panel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? [])
        if (target.expr) out.push({ panel: panel.title ?? "(untitled)", expr: target.expr });
      if (panel.panels) visit(panel.panels);
    }
  };
  visit(dashboard.panels);
  return out;
}

/** A dashboard query as Grafana would send it, with its variables filled in. */
export function withGrafanaVariables(expr: string): string {
  return expr
    .replaceAll("$__rate_interval", "1m")
    .replaceAll("$__range", "10m")
    .replaceAll("$__interval", "15s")
    .replaceAll("$cluster", ".*")
    .replaceAll("$namespace", ".*")
    .replaceAll("$vm", ".*");
}
