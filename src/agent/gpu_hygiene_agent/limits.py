"""Names, versions and bounds of the agent (constants only; every other module reads them here)."""

AGENT_VERSION = "0.16.0"
PROTOCOL = 2
MODULE_NAME = "_jupyterlab_gpu_hygiene_agent"  # the package's name in sys.modules
COMM_TARGET = "jupyterlab_gpu_hygiene.v1"
THREAD_NAME = "gpu-hygiene-sampler"
CLEAN_MARKER = "# gpu-hygiene: clear_gpu"
MIN_INTERVAL_MS = 250
DEFAULT_INTERVAL_MS = 1000
SLOW_INTERVAL_MS = 2000  # the sampler thread's slower facts (gpuProcesses), at most this often
# While a user cell runs, the sampler thread also reads torch's allocated bytes every READ_MS
# (each wait drawn from READ_MS * [0.5, 1.5), so that reads fall on random phases of a training
# step) and each sample reports the lowest read since the previous one (``allocatedMin``).
READ_MS = 20
# Bounds of the holder walk (see walk.Walker): objects expanded and references looked at, per
# root and per phase (user variables, output cache, last traceback are one phase each).
ROOT_VISITS = 5000
ROOT_EXAMINED = 200000
PHASE_VISITS = 20000
PHASE_EXAMINED = 1000000
MAX_PENDING_ERRORS = 32
MAX_TB_DEPTH = 1000  # traceback entries followed per traceback (RecursionError...)
# Message bounds, below what the browser accepts (src/protocol.ts): frames and models per
# inventory, characters per string. What is cut is said with ``truncated``.
MAX_FRAMES = 500
MAX_MODELS = 2000
MAX_TEXT = 500
MAX_HOLDERS = 100  # holder names reported per model
MAX_PATH_DEPTH = 40  # hops of a reported path
MAX_PATH_TEXT = 300  # characters of a path suffix
MAX_LABEL_SCAN = 10000  # container items searched to name one hop of a path
BIG_TENSOR = 1 << 20  # loose tensors from this size (bytes) are reported one by one
MAX_BIG_TENSORS = 200  # per root walk, to name them; the inventory reports the largest
MAX_TENSORS = 20  # loose tensors per inventory
MEASURED_TENSORS = 20000  # tensors measured per inventory (about 3 us each)
MAX_PARTS = 50  # parts per model
MAX_OWNERS = 50  # owner objects per inventory (owners.py)
MAX_OWNER_ATTRS = 200  # attributes of one owner object looked at
MAX_OWNER_ITEMS = 10000  # container items (or optimizer state entries) looked at per attribute
# Below an owner's own attributes (a Lightning Trainer's strategy holds its model and optimizers
# through two plain objects): hops followed, objects expanded and references looked at per
# owner and per inventory (owners.py). The owner's own attributes are always looked at.
MAX_OWNER_DEPTH = 4
OWNER_VISITS = 1000
OWNER_EXAMINED = 50000
OWNER_VISITS_TOTAL = 10000
OWNER_EXAMINED_TOTAL = 200000
MAX_GRAPH_HOLDERS = 50
MAX_HOOK_MODULES = 20000  # modules looked at for forward hooks feeding a graph holder
MAX_HOOKS_PER_HOLDER = 8
MAX_KEPT_ERRORS = 20  # keptErrors rows per inventory (errors.py)
MAX_KEPT_ERROR_FRAMES = 20  # frames per kept error
MAX_OPTIMIZERS = 20  # stranded optimizers per inventory (optimizers.py)
MAX_OPTIMIZER_PARAMS = 100000  # parameters (and state entries) looked at per optimizer
MAX_ROOTS = 200  # roots reported per inventory, largest first
MAX_SHARED_WITH = 8  # names in a root's sharedWith
GRAPH_ITEMS = 10000  # container items looked at per graph holder
GRAPH_ITEMS_TOTAL = 50000  # container items looked at for graph holders per inventory
GRAPH_NODES = 20000  # autograd nodes visited per inventory
FINGERPRINT_ITEMS = 1000  # items of a container / attributes of an object fingerprinted one by one
# torch without module registration hooks (torch < 2.0, tracker.ModuleTracker.rescan): the heap
# scan of each inventory looks at most SCAN_OBJECTS objects (about 0.1 us each) and stops
# looking after SCAN_MS. Listing the old generation costs about 55 ns per object: after a
# listing that took t ms the next int(t / SCAN_LIST_MS) scans skip the old generation (on
# average at most SCAN_LIST_MS of listing per inventory). Young generations are scanned each
# time, the old one newest first, then from where the last scan stopped: the whole heap is
# covered within a few cells.
SCAN_OBJECTS = 500000
SCAN_MS = 50.0
SCAN_LIST_MS = 20.0
MAX_CACHED_STORAGES = 200000  # entries of the storage cache (storage.py) before it is emptied

# Provenance (provenance.py, opt-in): live blocks whose allocation stack is read per snapshot
# (the largest),
# frames looked at per block, origin groups reported.
PROVENANCE_BLOCKS = 20000  # the largest ones (bench/provenance_cost.py: ~4 us a block)
PROVENANCE_FRAMES = 256  # a Lightning or generate() stack runs deep
PROVENANCE_GROUPS = 50
MAX_ROOT_ORIGINS = 3  # origins reported per root
MAX_SAME_CODE = 8  # other execution counts of the same cell text, per origin
MAX_CELL_RUNS = 10000  # execution counts remembered with their file and cell id

HIDDEN_HOLDER = "unreachable from the namespace"
UNKNOWN_HOLDER = "not found: the walk bound was hit"

# Models no root reaches (``outside.find_holders``): levels of referrers searched up from them
# (one scan of the collector's objects each, for all of them at once) and objects kept per level.
OUTSIDE_LEVELS = 8
OUTSIDE_FRONTIER = 2000
