# Sourced by the project's scripts: where the locally built tools live, and
# the settings that keep Pulumi local and quiet (no cloud backend, no update
# checks, no prompts). Safe to source from any folder.
#
#   WB_CACHE     ${XDG_CACHE_HOME:-~/.cache}/worldbackup: built tools (tools/),
#                shared by every checkout on the machine (scripts/lib/toolcache.sh)
#   WB_TOOLS     .tools in the checkout: bin/ links into the cache, test logs
#   PULUMI_HOME  $WB_CACHE/pulumi-home: the Kubernetes plugin is installed here
_wb_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WB_CACHE="${WB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/worldbackup}"
export WB_TOOLS="${WB_TOOLS:-$_wb_root/.tools}"
export PULUMI_HOME="${PULUMI_HOME:-$WB_CACHE/pulumi-home}"
export PATH="$WB_TOOLS/bin:$PATH"
export PULUMI_SKIP_UPDATE_CHECK=1
export PULUMI_DIY_BACKEND_NO_LOCK_WARNING=1
unset _wb_root
