/**
 * The options of the clean plan (`planClean` in `clean-cell.ts`): which
 * model a clean is limited to and which names it deletes first. Its own
 * module, types only, because the findings' actions name them
 * (`findings/types.ts`) and the clean cell's generator reaches the findings
 * through the stacking rule.
 */

/** Options of `planClean` (`clean-cell.ts`). */
export interface IPlanOptions {
  /**
   * Limit the plan to this model (an inventory `id`): only the output-cache
   * entries and the traceback that hold it are dropped.
   */
  modelId?: string;
  /**
   * With `modelId`: delete these user variables first (the ones that name
   * the model). Names that are not Python identifiers are left out, never
   * put in code. The model then counts as stale.
   */
  deleteNames?: string[];
}
