# bash completion for metaroce-ctl(8). Plane names and connection ids come
# from the running daemon (metaroce-ctl -j show ...) when it answers.

_metaroce_ctl_json_names()
{
	# $1: command ("show planes"), $2: the field to list ("name" or "id")
	local sock=()
	[[ -n $_mrc_sock ]] && sock=(-s "$_mrc_sock")
	metaroce-ctl "${sock[@]}" -j $1 2>/dev/null |
		grep -o "\"$2\":\"[^\"]*\"" | cut -d'"' -f4
}

_metaroce_ctl()
{
	local cur prev words cword
	_init_completion 2>/dev/null || {
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	}
	local objects="status show ping perf plane path drill history metrics monitor"
	local i obj="" sub="" _mrc_sock="" nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-s|--socket) _mrc_sock=${words[i+1]}; ((i++)) ;;
		-j|--json) ;;
		*)
			if [[ -z $obj ]]; then obj=${words[i]}
			elif [[ -z $sub ]]; then sub=${words[i]}
			else ((nargs++)); fi ;;
		esac
	done
	case $prev in
	-s|--socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--plane) COMPREPLY=($(compgen -W "$(_metaroce_ctl_json_names 'show planes' name)" -- "$cur")); return ;;
	--conn) COMPREPLY=($(compgen -W "$(_metaroce_ctl_json_names 'show conns' id)" -- "$cur")); return ;;
	--since|--duration|--auto-revert) COMPREPLY=($(compgen -W "30s 5m 1h 1d 7d" -- "$cur")); return ;;
	--port|--limit|--seconds|--msg-size|-c) return ;;
	esac
	if [[ -z $obj ]]; then
		COMPREPLY=($(compgen -W "$objects -s -j --help" -- "$cur"))
		return
	fi
	if [[ -z $sub ]]; then
		case $obj in
		show) COMPREPLY=($(compgen -W "planes peers conns paths" -- "$cur")) ;;
		plane) COMPREPLY=($(compgen -W "drain undrain" -- "$cur")) ;;
		path) COMPREPLY=($(compgen -W "steer disable enable reset" -- "$cur")) ;;
		drill) COMPREPLY=($(compgen -W "plane" -- "$cur")) ;;
		history) COMPREPLY=($(compgen -W "events drills paths planes" -- "$cur")) ;;
		ping) COMPREPLY=($(compgen -W "-c --help" -- "$cur")) ;;
		perf) COMPREPLY=($(compgen -W "--seconds --msg-size --help" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
		esac
		return
	fi
	case "$obj $sub" in
	"show planes") COMPREPLY=($(compgen -W "--watch --help" -- "$cur")) ;;
	"show paths") COMPREPLY=($(compgen -W "--conn --watch --help" -- "$cur")) ;;
	"plane drain")
		if ((nargs == 0)); then
			COMPREPLY=($(compgen -W "$(_metaroce_ctl_json_names 'show planes' name)" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "--force" -- "$cur"))
		fi ;;
	"plane undrain"|"drill plane")
		if ((nargs == 0)); then
			COMPREPLY=($(compgen -W "$(_metaroce_ctl_json_names 'show planes' name)" -- "$cur"))
		elif [[ $obj == drill ]]; then
			COMPREPLY=($(compgen -W "--peer --duration --link --auto-revert --json" -- "$cur"))
		fi ;;
	"path "*)
		if ((nargs == 0)); then
			COMPREPLY=($(compgen -W "$(_metaroce_ctl_json_names 'show conns' id)" -- "$cur"))
		elif ((nargs >= 2)) && [[ $sub == steer ]]; then
			COMPREPLY=($(compgen -W "--port --plane" -- "$cur"))
		fi ;;
	"history "*) COMPREPLY=($(compgen -W "--since --limit --help" -- "$cur")) ;;
	*) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
	esac
}
complete -F _metaroce_ctl metaroce-ctl
