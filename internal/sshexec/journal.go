package sshexec

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/occ-platform/terraform-provider-occ/internal/runtimerecord"
)

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// JournalEntry is one record of `journalctl -o json`, reduced to what a
// diagnostic shows.
type JournalEntry struct {
	Time time.Time
	// Message is the text of the record.
	Message string
	// Identifier is SYSLOG_IDENTIFIER: "systemd" for the manager's own
	// records about the unit, the unit's syslog identifier for its output.
	Identifier string
	Priority   int
	// Withheld is true when the record may quote the credentials file and
	// its text was replaced (AU7).
	Withheld bool
}

// withheldMessage replaces a systemd record that quotes a line of the
// operator's environment file.
const withheldMessage = "systemd ignored a malformed line in the credentials file (EnvironmentFile); its text is withheld because the file holds credentials. Every line must be NAME=value."

// ParseJournal reads `journalctl -o json` output (one JSON object per
// line), keeping the entries at or after since. Records in which systemd
// quotes the environment file are withheld: that file holds the operator's
// credentials (AU5, AU7). Lines that are not JSON are skipped.
func ParseJournal(out string, since time.Time) []JournalEntry {
	var entries []JournalEntry
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var raw map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &raw) != nil {
			continue
		}
		e := JournalEntry{Message: journalString(raw["MESSAGE"]), Identifier: journalString(raw["SYSLOG_IDENTIFIER"])}
		if us, err := strconv.ParseInt(journalString(raw["__REALTIME_TIMESTAMP"]), 10, 64); err == nil {
			e.Time = time.UnixMicro(us).UTC()
		}
		if !since.IsZero() && !e.Time.IsZero() && e.Time.Before(since) {
			continue
		}
		e.Priority, _ = strconv.Atoi(journalString(raw["PRIORITY"]))
		if quotesEnvironmentFile(journalString(raw["CODE_FUNC"]), e.Message) {
			e.Message, e.Withheld = withheldMessage, true
		}
		entries = append(entries, e)
	}
	return entries
}

// quotesEnvironmentFile recognises systemd's records that print a line of
// an EnvironmentFile (systemd 252: invalid_env, "Ignoring invalid
// environment assignment '…'").
func quotesEnvironmentFile(codeFunc, msg string) bool {
	return codeFunc == "invalid_env" || strings.Contains(msg, "invalid environment assignment") ||
		strings.Contains(msg, "environment assignment") && strings.Contains(msg, "'")
}

// journalString decodes a journal field: a JSON string, or an array of
// bytes for a value that is not valid UTF-8.
func journalString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []byte
	var ints []int
	if json.Unmarshal(raw, &ints) == nil {
		for _, i := range ints {
			bs = append(bs, byte(i))
		}
		return strings.ToValidUTF8(string(bs), "�")
	}
	return ""
}

// gatewayLine is the shape of OpenClaw's JSON console log lines.
type gatewayLine struct {
	Level     string `json:"level"`
	Subsystem string `json:"subsystem"`
	Message   string `json:"message"`
}

// Line renders an entry for a diagnostic: time, and for the gateway's JSON
// logs "level subsystem: message" (the first line of it); systemd's own
// records as they are.
func (e JournalEntry) Line() string {
	text := e.Message
	var g gatewayLine
	if strings.HasPrefix(text, "{") && json.Unmarshal([]byte(text), &g) == nil && g.Message != "" {
		text = g.Message
		if g.Subsystem != "" {
			text = g.Subsystem + ": " + text
		}
		if g.Level != "" {
			text = g.Level + " " + text
		}
	}
	// One diagnostic line per entry: a multi-line message (the gateway's
	// configuration errors name the offending key on a later line) is
	// joined with " | ".
	if strings.Contains(text, "\n") {
		var parts []string
		for _, l := range strings.Split(text, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				parts = append(parts, l)
			}
		}
		text = strings.Join(parts, " | ")
	}
	if len(text) > 600 {
		// Cut at a rune boundary: the text is valid UTF-8, and diagnostics
		// must stay so (they travel in protobuf strings).
		cut := 600
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	ts := ""
	if !e.Time.IsZero() {
		ts = e.Time.Format("15:04:05.000") + " "
	}
	return ts + text
}

// JournalLines renders the last max entries.
func JournalLines(entries []JournalEntry, max int) []string {
	if len(entries) > max {
		entries = entries[len(entries)-max:]
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Line())
	}
	return out
}

// StartupRecords reads the runtime contract's startup records from the
// entries (PR6 to PR9); bad holds the error of a record that breaks its
// closed sets.
func StartupRecords(entries []JournalEntry) (records []runtimerecord.Record, bad error) {
	for _, e := range entries {
		if e.Withheld {
			continue
		}
		r, ok, err := runtimerecord.Parse([]byte(e.Message))
		if !ok {
			continue
		}
		if err != nil {
			if bad == nil {
				bad = err
			}
			continue
		}
		records = append(records, r)
	}
	return records, bad
}

// ParseUnitState reads `systemctl show -p …` output (KEY=value lines).
func ParseUnitState(out string) UnitState {
	var s UnitState
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "LoadState":
			s.LoadState = v
		case "ActiveState":
			s.ActiveState = v
		case "SubState":
			s.SubState = v
		case "Result":
			s.Result = v
		case "ExecMainCode":
			s.ExecMainCode, _ = strconv.Atoi(v)
		case "ExecMainStatus":
			s.ExecMainStatus, _ = strconv.Atoi(v)
		case "NRestarts":
			s.NRestarts, _ = strconv.Atoi(v)
		case "InvocationID":
			s.InvocationID = v
		}
	}
	return s
}

// unitProperties are the properties ParseUnitState reads.
const unitProperties = "LoadState,ActiveState,SubState,Result,ExecMainCode,ExecMainStatus,NRestarts,InvocationID"

// String is the state as systemctl status would say it.
func (s UnitState) String() string {
	out := s.ActiveState
	if s.SubState != "" {
		out += " (" + s.SubState + ")"
	}
	if s.Result != "" && s.Result != "success" {
		out += ", result " + s.Result
	}
	if d := s.ExitDescription(); d != "" && (s.ActiveState != "active" || s.NRestarts > 0) {
		out += ", main process " + d
	}
	if s.NRestarts > 0 {
		out += fmt.Sprintf(", %d automatic restart(s)", s.NRestarts)
	}
	return out
}

// Failed reports whether the unit's start failed or its process exited
// since it was started: failed, waiting to restart, restarted, or stopped.
func (s UnitState) Failed() bool {
	switch {
	case s.ActiveState == "failed":
		return true
	case s.SubState == "auto-restart":
		return true
	case s.NRestarts > 0:
		return true
	case s.ActiveState == "inactive" || s.ActiveState == "deactivating":
		return true
	}
	return false
}
