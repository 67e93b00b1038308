#!/usr/bin/env bash
# make demo-ssh: apply examples/quickstart-ssh to a real systemd host, show
# that a second plan is empty, and send the Agent one turn.
#
# The host is the test environment's systemd-nspawn container (make
# testenv-ssh builds it): a real systemd, a real sshd on a free loopback
# port, the real OpenClaw gateway. The model is local: a fake
# Anthropic-compatible endpoint on the loopback the host shares, which
# answers only the demo's key; nothing is billed. The demo writes the
# operator's credentials file on the host (that key), applies, prints the activated revision, plans again, sends one message
# through an SSH tunnel to the gateway's chat completions endpoint and
# prints the answer, then destroys and stops the host. OCC_DEMO_KEEP=1
# leaves both running and says how to stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
terraform="${TERRAFORM:-terraform}"
work="$root/.dev/demo-ssh"
hostdir="$work/host"

[ "$(id -u)" -eq 0 ] || { echo "demo-ssh: must run as root (systemd-nspawn)" >&2; exit 1; }

started=$SECONDS
step() { printf '==> [+%3ss] %s\n' "$((SECONDS - started))" "$*"; }

rm -rf "$work"
mkdir -p "$work" "$hostdir"
step "building the host command"
go build -o "$root/.dev/bin/occ-ssh-host" ./internal/testenv/sshhost/cmd/occ-ssh-host

step "starting the systemd host (testenv-ssh rootfs)"
# The one key the local model endpoint takes: a demo value, written to the
# host's credentials file only.
model_key="occ-demo-ssh-local-key"
"$root/.dev/bin/occ-ssh-host" -dir "$hostdir" -model-key "$model_key" >"$work/host.log" 2>&1 </dev/null &
host_pid=$!
echo "$host_pid" >"$work/host.pid"

cleanup() {
	local rc=$?
	if [ "${OCC_DEMO_KEEP:-}" = 1 ] && [ "$rc" -eq 0 ]; then
		echo "==> kept running. Destroy with: (cd $work/tf && TF_CLI_CONFIG_FILE=${TF_CLI_CONFIG_FILE:-} $terraform destroy -auto-approve); stop the host with: kill $host_pid"
		return
	fi
	if [ -f "$work/tf/terraform.tfstate" ] && kill -0 "$host_pid" 2>/dev/null; then
		step "terraform destroy"
		(cd "$work/tf" && "$terraform" destroy -auto-approve -input=false >"$work/destroy.log" 2>&1) ||
			echo "demo-ssh: destroy failed, see $work/destroy.log" >&2
	fi
	if kill -0 "$host_pid" 2>/dev/null; then
		step "stopping the host (pid $host_pid)"
		kill -TERM "$host_pid"
		wait "$host_pid" 2>/dev/null || true
	fi
	exit "$rc"
}
trap cleanup EXIT

for _ in $(seq 1 1800); do
	[ -f "$hostdir/host.env" ] && break
	if ! kill -0 "$host_pid" 2>/dev/null; then
		echo "demo-ssh: the host did not start:" >&2
		cat "$work/host.log" >&2
		exit 1
	fi
	sleep 0.1
done
[ -f "$hostdir/host.env" ] || { echo "demo-ssh: the host did not answer within 180 s; see $work/host.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$hostdir/host.env"
head -n 2 "$work/host.log"

# The operator's part: the credentials file, written on the host over SSH
# with the host key verified. The provider never reads or writes it.
printf '[%s]:%s %s\n' "$OCC_SSH_HOST" "$OCC_SSH_PORT" "$OCC_SSH_HOST_KEY" >"$work/known_hosts"
step "writing the credentials file /etc/occ/assistant.env on the host (operator's step)"
ssh -q -i "$OCC_SSH_KEY_FILE" -p "$OCC_SSH_PORT" -o UserKnownHostsFile="$work/known_hosts" -o StrictHostKeyChecking=yes \
	-o BatchMode=yes "$OCC_SSH_USER@$OCC_SSH_HOST" \
	"sudo install -d -m 0755 /etc/occ && sudo sh -c 'umask 077; printf \"ANTHROPIC_API_KEY=%s\\n\" \"\$1\" > /etc/occ/assistant.env' sh $model_key"

mkdir -p "$work/tf"
cp examples/quickstart-ssh/*.tf examples/quickstart-ssh/*.tftpl "$work/tf/"
vars=(-input=false -var "host=$OCC_SSH_HOST" -var "port=$OCC_SSH_PORT" -var "host_key=$OCC_SSH_HOST_KEY"
	-var "ssh_user=$OCC_SSH_USER" -var "private_key_file=$OCC_SSH_KEY_FILE" -var "model_base_url=$OCC_SSH_MODEL_URL")
cd "$work/tf"
# A later destroy needs the same variables.
printf 'host = "%s"\nport = %s\nhost_key = "%s"\nssh_user = "%s"\nprivate_key_file = "%s"\nmodel_base_url = "%s"\n' \
	"$OCC_SSH_HOST" "$OCC_SSH_PORT" "$OCC_SSH_HOST_KEY" "$OCC_SSH_USER" "$OCC_SSH_KEY_FILE" "$OCC_SSH_MODEL_URL" >terraform.tfvars

step "terraform apply (blocks until the gateway answers /readyz)"
t0=$SECONDS
"$terraform" apply -auto-approve "${vars[@]}"
step "activated in $((SECONDS - t0)) s"
echo "revision: $("$terraform" output -raw revision)"
echo "status:   $("$terraform" output -raw status)"
echo "endpoint: $("$terraform" output -raw endpoint) (on the host's loopback)"

step "a second plan"
set +e
"$terraform" plan -detailed-exitcode "${vars[@]}" >"$work/plan.log" 2>&1
code=$?
set -e
case "$code" in
0) echo "second plan: no changes" ;;
2) echo "second plan is NOT empty:" >&2; cat "$work/plan.log" >&2; exit 1 ;;
*) echo "second plan failed:" >&2; cat "$work/plan.log" >&2; exit 1 ;;
esac

step "a turn: one message through an SSH tunnel to the gateway's chat completions endpoint"
# The gateway's token is the agent's own, which the deploy made on the host
# in a file only root reads.
token_file=/etc/openclaw/assistant/gateway-token.env
gateway_token="$(ssh -q -i "$OCC_SSH_KEY_FILE" -p "$OCC_SSH_PORT" -o UserKnownHostsFile="$work/known_hosts" -o StrictHostKeyChecking=yes \
	-o BatchMode=yes "$OCC_SSH_USER@$OCC_SSH_HOST" "sudo sed -n 's/^OPENCLAW_GATEWAY_TOKEN=//p' $token_file")"
[ -n "$gateway_token" ] || { echo "demo-ssh: the agent's token file $token_file holds no token" >&2; exit 1; }
endpoint="$("$terraform" output -raw endpoint)"
gw_port="${endpoint##*:}"
local_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 28789)"
ssh -q -N -i "$OCC_SSH_KEY_FILE" -p "$OCC_SSH_PORT" -o UserKnownHostsFile="$work/known_hosts" -o StrictHostKeyChecking=yes \
	-o BatchMode=yes -o ExitOnForwardFailure=yes -L "127.0.0.1:$local_port:127.0.0.1:$gw_port" "$OCC_SSH_USER@$OCC_SSH_HOST" &
tunnel_pid=$!
for _ in $(seq 1 50); do
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$local_port/healthz" && break
	sleep 0.1
done
echo "    \$ ssh -L $local_port:127.0.0.1:$gw_port $OCC_SSH_USER@$OCC_SSH_HOST -p $OCC_SSH_PORT"
echo "    \$ TOKEN=\$(ssh $OCC_SSH_USER@$OCC_SSH_HOST -p $OCC_SSH_PORT sudo sed -n 's/^OPENCLAW_GATEWAY_TOKEN=//p' $token_file)"
echo "    \$ curl -sS http://127.0.0.1:$local_port/v1/chat/completions -H \"Authorization: Bearer \$TOKEN\" \\"
echo "        -d '{\"model\":\"openclaw/default\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]}'"
t_turn=$(date +%s%N)
answer_json="$(curl -sS --max-time 120 -H "Authorization: Bearer $gateway_token" -H 'Content-Type: application/json' \
	-d '{"model":"openclaw/default","messages":[{"role":"user","content":"Say hello."}]}' \
	-w '\n%{http_code}' "http://127.0.0.1:$local_port/v1/chat/completions")" || { kill "$tunnel_pid"; echo "demo-ssh: the turn failed" >&2; exit 1; }
turn_ms=$((($(date +%s%N) - t_turn) / 1000000))
kill "$tunnel_pid" 2>/dev/null || true
wait "$tunnel_pid" 2>/dev/null || true
status="${answer_json##*$'\n'}"
answer_json="${answer_json%$'\n'*}"
[ "$status" = 200 ] || { printf '%s\n' "$answer_json" >&2; echo "demo-ssh: the gateway answered the turn with HTTP $status" >&2; exit 1; }
answer="$(printf '%s' "$answer_json" | sed -n 's/.*"message":{[^}]*"content":"\([^"]*\)".*/\1/p')"
[ -n "$answer" ] || { printf '%s\n' "$answer_json" >&2; echo "demo-ssh: the gateway's answer holds no message" >&2; exit 1; }
echo "    the agent answered in ${turn_ms} ms: $answer"
echo "    (the local fake model's words, through the real gateway on the systemd host)"
step "done"
