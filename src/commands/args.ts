/**
 * The argument schemas of the commands (`describedBy`), built from a few
 * property helpers instead of repeating the JSON-schema literals.
 */
import type { ReadonlyJSONObject } from '@lumino/coreutils';

/** A string property of a command's arguments. */
type IStringArg = {
  type: 'string';
  description: string;
};

/** A list-of-strings property of a command's arguments. */
type IStringsArg = {
  type: 'array';
  items: { type: 'string' };
  description: string;
};

/** A property of a command's arguments. */
type IArg = IStringArg | IStringsArg;

/** A string argument described by `description`. */
function text(description: string): IStringArg {
  return { type: 'string', description };
}

/** A list-of-strings argument described by `description`. */
function texts(description: string): IStringsArg {
  return { type: 'array', items: { type: 'string' }, description };
}

/**
 * A command's `describedBy`: an object of `properties`, with `required`
 * where some are.
 */
function described<P extends Record<string, IArg>>(
  properties: P,
  required?: Array<keyof P & string>
): { args: ReadonlyJSONObject } {
  return {
    args: { type: 'object', properties, ...(required ? { required } : {}) }
  };
}

/** The kernel a command acts on. */
const kernelId = text(
  'Kernel to act on (default: the current notebook’s kernel)'
);

/** The model a VRAM panel row names. */
const modelId = text('Inventory id of the model (hex id() in the kernel)');

/** Arguments of the per-kernel commands (Clean GPU, restart). */
export const kernelArgs = described({ kernelId });

/** Arguments of the per-model commands (VRAM panel rows). */
export const modelArgs = described({ modelId, kernelId }, ['modelId']);

/** Arguments of the delete command: a model and, optionally, which variables to delete. */
export const deleteArgs = described(
  {
    modelId,
    kernelId,
    names: texts(
      'User variables to delete (default: those that name the model itself); only variables that reach the model and are Python identifiers are kept'
    )
  },
  ['modelId']
);

/** Arguments of the drop-trainer command: a YOLO and the variable naming it. */
export const dropTrainerArgs = described(
  {
    modelId,
    kernelId,
    name: text(
      'The user variable that names the YOLO (default: the first variable naming it itself)'
    )
  },
  ['modelId']
);

/** A number property of a command's arguments. */
const numberArg = (description: string) => ({ type: 'number', description });

/** Arguments of Go to Origin: an execution count and a line in that cell. */
export const originArgs = {
  args: {
    type: 'object',
    properties: {
      cell: numberArg('Execution count of the cell to select'),
      line: numberArg('1-based line of that cell to put the cursor on'),
      cellId: {
        type: 'string',
        description:
          'The notebook cell id the kernel saw run (preferred over the count)'
      },
      kernelId
    },
    required: ['cell']
  }
} as const;

/** Arguments of the shut-down command: a kernel of the server's answer. */
export const shutdownArgs = described({
  kernelId: text(
    'Id of a kernel of this server, as GET gpu-hygiene/kernels lists it (default: choose one in a dialog)'
  )
});

/** Arguments of the graph-holder command (VRAM panel, toast). */
export const graphArgs = described(
  {
    name: text(
      'The user variable that keeps autograd graphs (a graph holder of the inventory)'
    ),
    kernelId
  },
  ['name']
);

/** Arguments of the drop-workers command. */
export const workersArgs = described(
  {
    names: texts(
      'User variables that keep DataLoader workers (holders of the inventory’s children); only identifiers that are the loader or iterator themselves are kept'
    ),
    kernelId
  },
  ['names']
);

/** Arguments of the per-variable commands (move to CPU, delete). */
export const variableArgs = described(
  {
    name: text(
      'The user variable (a variable root of the inventory; Python identifiers only)'
    ),
    with: texts(
      "Delete only: other user variables deleted in the same cell because they keep the first one (an optimizer's LR scheduler)"
    ),
    kernelId
  },
  ['name']
);
