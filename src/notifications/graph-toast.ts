/**
 * Graph holders: one toast per (kernel, holder) that keeps ≥ 64 MiB of
 * autograd graphs alive on a CUDA device (`losses.append(loss)`) or in CPU
 * RAM (a CPU kernel: the same leak, it just does not fill a GPU; outside the
 * panel nothing else would say so). Its type is the findings' one severity
 * scale (`analysis/findings/severity.ts`): a warning from 0.5 % of the
 * device's memory (and 64 MiB), else an info. Raised
 * once per kernel and variable, ever, and updated in place while on screen
 * (the count and bytes grow with the list); dismissed when the variable no
 * longer qualifies. Setting: `warnOnGraphHolders`.
 */
import {
  graphRows,
  graphsToWarn,
  GRAPH_WARN_BYTES,
  IGraphRow
} from '../analysis/memory/graph-holders';
import type { IInventory } from '../protocol';
import type { GpuKernelModel } from '../model';
import type { IGpuSettings } from '../tokens';
import {
  IRuleContext,
  IToastRule,
  RuleResult,
  STATE_TOAST_AUTO_CLOSE
} from './rule';
import { describeGraphHolder } from './text';
import { factsOf } from '../analysis/findings';
import { faultSeverity } from '../analysis/findings/severity';

/** Graph holders worth a toast: ≥ 64 MiB on one CUDA device, or in CPU RAM only. */
function graphsToToast(inventory: IInventory | null): IGraphRow[] {
  const cpu = graphRows(inventory).filter(
    row => row.device === null && row.bytes >= GRAPH_WARN_BYTES
  );
  return [...graphsToWarn(inventory), ...cpu];
}

/** The graph-holder rule: Fix… (when it can be fixed), Open VRAM panel, Don't warn again. */
export function graphsRule({ trans, actions }: IRuleContext): IToastRule {
  const check = (model: GpuKernelModel, settings: IGpuSettings): RuleResult => {
    const kernelId = model.kernelId;
    const facts = factsOf(model);
    const rows = settings.warnOnGraphHolders
      ? graphsToToast(model.inventory)
      : [];
    return rows.map(row => {
      const message = describeGraphHolder(row, trans);
      return {
        key: row.graph.name,
        // the one severity scale of the findings (issue 28, item 5)
        type: faultSeverity(row.graph.bytes, facts),
        message,
        signature: message,
        autoClose: STATE_TOAST_AUTO_CLOSE,
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
