/**
 * Detach Autograd Graphs…: replace the tensors with a grad_fn in a graph
 * holder (a user variable keeping autograd graphs) by `tensor.detach()`.
 */
import { Notification } from '@jupyterlab/apputils';
import { formatBytes, sumBytes } from '../analysis/format';
import {
  canFixGraph,
  generateDetachCell,
  isOutputGraph,
  removableHooks,
  sharedOutputs
} from '../analysis/memory/graph-holders';
import type { IGraphHolder } from '../protocol';
import { CommandIDs } from '../tokens';
import { graphArgs } from './args';
import type { ICommandContext } from './context';
import { asCode } from './confirm';
import type { IReceipt } from './receipt';

/** The receipt's module (with the toasts' texts it uses): loaded when a fix runs, off JupyterLab's start path. */
const receiptModule = () => import('./receipt');

/** The kernel model's notebook and the graph holder named by `args.name`. */
function graphTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; name?: unknown }
) {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  const graph =
    model?.inventory?.graphs.find(g => g.name === args.name) ?? null;
  return { panel, graph };
}

/** Say why `graph` cannot be fixed: it is gone, or not a plain name holding its tensors. */
function cannotFix(ctx: ICommandContext, graph: IGraphHolder | null): void {
  const { trans } = ctx;
  Notification.warning(
    graph
      ? trans.__(
          'That variable cannot be fixed from here: it is not a plain Python name holding the tensors itself.'
        )
      : trans.__(
          'That variable no longer keeps autograd graphs; the VRAM panel shows the latest inventory.'
        ),
    { autoClose: 5000 }
  );
}

/** Ask whether to detach the tensors of `graph`. */
function confirmDetach(
  ctx: ICommandContext,
  graph: IGraphHolder,
  outputs: ReadonlyArray<IGraphHolder>,
  code: string
): Promise<boolean> {
  const { trans } = ctx;
  const hooks = removableHooks(graph);
  return ctx.confirm(
    trans.__('Detach the tensors in %1?', asCode(graph.name)),
    (isOutputGraph(graph)
      ? trans.__(
          "A cell is inserted below the active cell that gives IPython's names of the displayed output %1 (%2) the same value without its autograd graphs (tensor.detach()); the graphs keep %3, freed unless something else holds them (the toast after the cell says what was). You can no longer call backward() through it. Next time evaluate under torch.no_grad(), or show loss.item().",
          graph.name,
          (graph.names ?? [graph.name]).join(', '),
          formatBytes(sumBytes(graph.bytes))
        )
      : trans.__(
          'A cell is inserted below the active cell that replaces each tensor with a grad_fn directly in %1 by tensor.detach(): the values stay; their autograd graphs keep %2, freed unless something else holds them (the toast after the cell says what was). You can no longer call backward() through them. Next time store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
          graph.name,
          formatBytes(sumBytes(graph.bytes))
        )) +
      (outputs.length
        ? ` ${trans.__(
            'The displayed output %1 keeps the same graphs: the cell detaches it too.',
            outputs.map(g => g.name).join(', ')
          )}`
        : '') +
      (hooks.length
        ? ` ${trans.__(
            'The cell also removes the forward hook on %1 that appends to %2: it would append new graphs at the next forward pass. Register it again with output.detach() if you still need it.',
            hooks.map(h => h.module).join(', '),
            graph.name
          )}`
        : ''),
    trans.__('Detach'),
    code
  );
}

/** The receipt of the detach cell of `graph`: its graphs gone, and what that freed. */
function detachReceipt(ctx: ICommandContext, graph: IGraphHolder): IReceipt {
  const { trans } = ctx;
  return {
    done: trans.__('Detached the tensors in %1', graph.name),
    toRun: trans.__(
      'Run the inserted cell to detach the tensors in %1.',
      graph.name
    ),
    stillHeld: after => {
      const left = after.graphs.find(g => g.name === graph.name);
      return left
        ? trans.__(
            '%1 still keeps autograd graphs (~%2)',
            graph.name,
            formatBytes(sumBytes(left.bytes))
          )
        : null;
    }
  };
}

/** Register Detach Autograd Graphs…. */
export function addDetachCommand(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.fixGraphHolder, {
    label: trans.__('Detach Autograd Graphs…'),
    caption: trans.__(
      'Ask, then insert and run a cell that replaces the tensors with a grad_fn in this variable by tensor.detach(): same values, no graph'
    ),
    describedBy: graphArgs,
    isEnabled: args => {
      const { panel, graph } = graphTarget(ctx, args);
      return !!panel && !!graph && canFixGraph(graph);
    },
    execute: async args => {
      const { panel, graph } = graphTarget(ctx, args);
      const model = ctx.modelFor(args);
      const outputs = graph
        ? sharedOutputs(graph, model?.inventory ?? null)
        : [];
      const code = graph ? generateDetachCell(graph, outputs) : null;
      if (!panel || !graph || code === null) {
        cannotFix(ctx, graph);
        return false;
      }
      if (!(await confirmDetach(ctx, graph, outputs, code))) {
        return false;
      }
      await (
        await receiptModule()
      ).insertWithReceipt(
        ctx,
        model,
        panel,
        code,
        {
          tag: 'gpu-hygiene-detach-graphs',
          key: `detach-graphs:${graph.name}`
        },
        detachReceipt(ctx, graph)
      );
      return true;
    }
  });
}
