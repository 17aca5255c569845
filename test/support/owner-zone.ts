// The owner's zone for tests of the learned warm start (issue 36): the rule learns arrivals per
// local weekday, so a test whose arrival is minutes away needs a zone where those minutes are not
// near midnight (the arrival must belong to today there).

/** Minutes since local midnight in `zone` at `ms`. */
export function localMinute(zone: string, ms: number): number {
  const [h, m] = new Intl.DateTimeFormat("en-GB", {
    timeZone: zone,
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  })
    .format(new Date(ms))
    .split(":")
    .map(Number);
  return h! * 60 + m!;
}

/** The first of `zones` where `ms` is at least half an hour from either midnight. */
export function zoneAwayFromMidnight(zones: readonly string[], ms: number): string {
  const zone = zones.find((z) => {
    const minute = localMinute(z, ms);
    return minute > 30 && minute < 23 * 60;
  });
  if (!zone) throw new Error(`every zone of ${zones.join(", ")} is near midnight`);
  return zone;
}
