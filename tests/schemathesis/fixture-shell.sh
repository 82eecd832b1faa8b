#!/bin/sh
# The program of the sessions and container agents the schemathesis run acts on: it looks like a
# shell to `talk` and to a routed prompt, and runs nothing. It shows a prompt (`$ `), and again
# after each line, so a prompt sent to it is taken at once (its screen changes at the first
# Enter) and an agent running it is ready when the prompt shows. Every line typed into it is read
# and dropped, except that a talk's line (`printf '__AH_%s_B\r\033[K' N; COMMAND; printf ...`)
# gets the two markers a shell would print, with exit code 0, so a talk ends at once; COMMAND is
# never run. Ctrl-C, Ctrl-\ and Ctrl-Z are ignored, so typed keys cannot end it (only a signal
# from the hub, SIGTERM, SIGKILL or SIGHUP, or a kill does); and the terminal is made to keep no
# line of its own (no line editing, no 4 KiB line limit, no Ctrl-S that would stop its output),
# so whatever was typed before cannot hold up a talk.
trap '' INT QUIT TSTP
stty -icanon -ixon min 1 time 0
begin="printf '__AH_%s_B\r\033[K' "
printf '$ '
while :; do
    if ! IFS= read -r line; then
        # A terminal that is gone: the hub ends the session.
        sleep 0.1
        continue
    fi
    case $line in
    *"$begin"*)
        nonce=${line#*"$begin"}
        nonce=${nonce%%;*}
        printf '__AH_%s_B\r\033[K' "$nonce"
        printf '\n__AH_%s_E%d\r\033[K' "$nonce" 0
        ;;
    esac
    printf '$ '
done
