/**
 * Where shell branches may run (docs/rules.md, "Branches"): a shell branch is a session shell with
 * the session's authority, so a job or a split branch gets argv branches only, for `marsh split`
 * (the daemon refuses) and `marsh fanout` inside a job (the in-job client refuses) alike. Pure.
 *
 * @module
 */

/** The refusal of shell branch `label` from a job or a split branch. */
export function shellBranchRefusal(label: string): string {
  return `${label}: shell branches (-b, split { }) run only from the session shell; ` +
    "from a job or a split branch use argv branches: ::: LABEL CMD [ARG...]";
}
