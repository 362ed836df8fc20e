/**
 * Graph holders: one warning per (kernel, variable) that keeps ≥ 64 MiB of
 * autograd graphs alive on a CUDA device (`losses.append(loss)`). Raised
 * once per kernel and variable, ever, and updated in place while on screen
 * (the count and bytes grow with the list); dismissed when the variable no
 * longer qualifies. Setting: `warnOnGraphHolders`.
 */
import { graphsToWarn } from '../analysis/graphs';
import type { GpuKernelModel } from '../model';
import type { IGpuSettings } from '../tokens';
import type { IRuleContext, IToastRule, RuleResult } from './rule';
import { describeGraphHolder } from './text';

/** The graph-holder rule: Fix… (when it can be fixed), Open VRAM panel, Don't warn again. */
export function graphsRule({ trans, actions }: IRuleContext): IToastRule {
  const check = (model: GpuKernelModel, settings: IGpuSettings): RuleResult => {
    const kernelId = model.kernelId;
    const rows = settings.warnOnGraphHolders
      ? graphsToWarn(model.inventory)
      : [];
    return rows.map(row => {
      const message = describeGraphHolder(row, trans);
      return {
        key: row.graph.name,
        type: 'warning',
        message,
        signature: message,
        autoClose: false,
        actions: [
          ...(row.fixable
            ? [actions.fixGraphHolder(kernelId, row.graph.name)]
            : []),
          actions.openPanel(),
          actions.dontWarnAgain(
            'warnOnGraphHolders',
            trans.__('Turn off autograd-graph warnings in the settings')
          )
        ]
      };
    });
  };
  return {
    id: 'graphs',
    policy: 'once',
    describes: 'state',
    onInventory: (model, _inventory, settings) => check(model, settings),
    onSettings: check
  };
}
