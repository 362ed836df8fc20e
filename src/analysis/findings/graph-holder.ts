/**
 * Graph holder: a user variable, an attribute or a displayed output that
 * keeps autograd graphs alive (`losses.append(loss)`), from
 * `inventory.graphs`: severity on the one scale (`./severity.ts`); none below
 * `GRAPH_FIX_MIN_BYTES` (1 MiB: a few scalar losses, harmless). Fix: "Fix…" (ask, then detach) where `canFixGraph` allows
 * it, else no button. A holder fed by a forward hook (`hooks`) says on
 * which module; its Fix… also removes that hook. Its toast stays the graph-holder rule's
 * (`notifications/graph-toast.ts`).
 */
import { formatBytes } from '../format';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IGraphHolder, IInventory } from '../../protocol';
import {
  GRAPH_FIX_MIN_BYTES,
  graphRows,
  isOutputGraph,
  sharedOutputs
} from '../memory/graph-holders';
import type { FindingRule, IFinding } from './types';
import { faultSeverity } from './severity';

/**
 * What the finding adds when other holders keep the same graphs
 * (`sharedWith`): the displayed outputs its Fix… detaches too
 * ({@link sharedOutputs}), and the holders it leaves, which keep those
 * graphs' memory after it.
 */
function sharedNote(
  trans: TranslationBundle,
  graph: IGraphHolder,
  inventory: IInventory | null,
  fixable: boolean
): string {
  if (!graph.sharedWith?.length) {
    return '';
  }
  // "Fix… detaches it too" only where this finding has a Fix…
  const outputs = fixable
    ? sharedOutputs(graph, inventory).map(g => g.name)
    : [];
  const others = graph.sharedWith.filter(n => !outputs.includes(n));
  return [
    outputs.length
      ? trans.__(
          'The displayed output %1 keeps the same graphs: Fix… detaches it too.',
          outputs.join(', ')
        )
      : '',
    others.length
      ? trans.__(
          '%1 also keeps some of these graphs: what they saved stays while it does.',
          others.join(', ')
        )
      : ''
  ]
    .filter(Boolean)
    .map(text => ` ${text}`)
    .join('');
}

/** The graph-holder rule: one finding per graph holder. */
export const graphHolderRule: FindingRule = facts =>
  graphRows(facts.inventory)
    .filter(row => row.bytes >= GRAPH_FIX_MIN_BYTES)
    .map((row): IFinding => ({
      kind: 'graph-holder',
      id: `graph-holder:${row.graph.name}`,
      severity: faultSeverity(row.graph.bytes, facts),
      subject: row.graph.path,
      bytes: { ...row.graph.bytes },
      explain: trans =>
        (isOutputGraph(row.graph)
          ? trans._n(
              'The displayed output %2 (%5) keeps %1 autograd graph alive (%3%4): it was computed from tensors with a grad_fn. Evaluate under torch.no_grad(), or show loss.item(). Fix… keeps its value and drops the graph.',
              'The displayed output %2 (%5) keeps %1 autograd graphs alive (%3%4): it was computed from tensors with a grad_fn. Evaluate under torch.no_grad(), or show loss.item(). Fix… keeps its value and drops the graphs.',
              row.graph.count,
              row.graph.path,
              row.graph.truncated ? '≥ ' : '~',
              formatBytes(row.bytes),
              (row.graph.names ?? [row.graph.name]).join(', ')
            )
          : row.graph.hooks?.length
            ? trans._n(
                '%2 keeps %1 autograd graph alive (%3%4), appended by a forward hook on %5: run the model under torch.no_grad(), or store output.detach() in the hook. Fix… detaches them and removes the hook.',
                '%2 keeps %1 autograd graphs alive (%3%4), appended by a forward hook on %5: run the model under torch.no_grad(), or store output.detach() in the hook. Fix… detaches them and removes the hook.',
                row.graph.count,
                row.graph.path,
                row.graph.truncated ? '≥ ' : '~',
                formatBytes(row.bytes),
                row.graph.hooks.map(h => h.module).join(', ')
              )
            : trans._n(
                '%2 keeps %1 autograd graph alive (%3%4): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
                '%2 keeps %1 autograd graphs alive (%3%4): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
                row.graph.count,
                row.graph.path,
                row.graph.truncated ? '≥ ' : '~',
                formatBytes(row.bytes)
              )) + sharedNote(trans, row.graph, facts.inventory, row.fixable),
      evidence: [
        row.graph.path,
        `${row.graph.gradFn} ×${row.graph.count}`,
        ...(row.graph.hooks ?? []).map(
          h => `${h.module}._forward_hooks[${h.key}]`
        )
      ],
      fix: row.fixable
        ? { kind: 'detach', name: row.graph.name }
        : { kind: 'none' }
    }));
