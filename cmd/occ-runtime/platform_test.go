package main

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// The runtime images for each platform the release publishes (issue 25),
// read from the archives testenv/images.sh built (make images, and
// `testenv/images.sh build --arch arm64`, which .ci/run runs): the arm64
// ones were assembled on this amd64 machine without emulation, so the
// test reads them rather than runs them.

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ociArchive is an OCI archive (an image layout in a tar) opened for
// reading its blobs by digest.
type ociArchive struct {
	path  string
	index []ociDescriptor
	blobs map[string]int64 // digest -> offset of the entry's data
}

func openOCIArchive(t *testing.T, file string) *ociArchive {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &ociArchive{path: file, blobs: map[string]int64{}}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			var idx struct{ Manifests []ociDescriptor }
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				t.Fatalf("%s: index.json: %v", file, err)
			}
			a.index = idx.Manifests
		case strings.HasPrefix(name, "blobs/sha256/") && h.Typeflag == tar.TypeReg:
			off, err := f.Seek(0, io.SeekCurrent)
			if err != nil {
				t.Fatal(err)
			}
			a.blobs["sha256:"+strings.TrimPrefix(name, "blobs/sha256/")] = off
		}
	}
	return a
}

// blob opens the blob of a digest (its bytes in the archive file).
func (a *ociArchive) blob(t *testing.T, digest string, size int64) io.ReadCloser {
	t.Helper()
	off, ok := a.blobs[digest]
	if !ok {
		t.Fatalf("%s: no blob %s", a.path, digest)
	}
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, size), f}
}

func (a *ociArchive) json(t *testing.T, d ociDescriptor, v any) {
	t.Helper()
	r := a.blob(t, d.Digest, d.Size)
	defer r.Close()
	if err := json.NewDecoder(r).Decode(v); err != nil {
		t.Fatalf("%s: blob %s: %v", a.path, d.Digest, err)
	}
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string
		Entrypoint []string
		Labels     map[string]string
	} `json:"config"`
}

// imageFile is what the test learns of a file in an image's layers.
type imageFile struct {
	machine  elf.Machine // of an ELF file, else 0
	linkname string      // of a symbolic link
	dir      bool
}

// imageFiles reads every layer of the manifest, in order, into the files
// of the image: ELF machine of each regular file starting with an ELF
// header, links, directories (whiteouts honoured).
func imageFiles(t *testing.T, a *ociArchive, m ociManifest) map[string]imageFile {
	t.Helper()
	files := map[string]imageFile{}
	for _, l := range m.Layers {
		if !strings.HasSuffix(l.MediaType, "tar+gzip") {
			t.Fatalf("%s: layer %s is %s; want gzip layers", a.path, l.Digest, l.MediaType)
		}
		r := a.blob(t, l.Digest, l.Size)
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("%s: layer %s: %v", a.path, l.Digest, err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", a.path, l.Digest, err)
			}
			name := path.Clean("/" + h.Name)
			if base := path.Base(name); strings.HasPrefix(base, ".wh.") {
				delete(files, path.Join(path.Dir(name), strings.TrimPrefix(base, ".wh.")))
				continue
			}
			switch h.Typeflag {
			case tar.TypeDir:
				files[name] = imageFile{dir: true}
			case tar.TypeSymlink:
				files[name] = imageFile{linkname: h.Linkname}
			case tar.TypeLink:
				files[name] = files[path.Clean("/"+h.Linkname)]
			case tar.TypeReg:
				var hdr [20]byte
				f := imageFile{}
				if n, _ := io.ReadFull(tr, hdr[:]); n == len(hdr) && string(hdr[:4]) == elf.ELFMAG {
					order := binary.ByteOrder(binary.LittleEndian)
					if elf.Data(hdr[elf.EI_DATA]) == elf.ELFDATA2MSB {
						order = binary.BigEndian
					}
					f.machine = elf.Machine(order.Uint16(hdr[18:20]))
				}
				files[name] = f
			}
		}
		r.Close()
	}
	return files
}

// resolve follows symbolic links (absolute or relative, also in the
// directories on the way) to the file they name in the image.
func resolve(files map[string]imageFile, name string) (string, imageFile, error) {
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(strings.TrimPrefix(path.Clean(name), "/"), "/")
		cur, relinked := "/", false
		for i, p := range parts {
			next := path.Join(cur, p)
			f, ok := files[next]
			if !ok {
				return "", imageFile{}, fmt.Errorf("%s: %s does not exist", name, next)
			}
			if f.linkname != "" {
				target := f.linkname
				if !path.IsAbs(target) {
					target = path.Join(cur, target)
				}
				name = path.Join(append([]string{target}, parts[i+1:]...)...)
				relinked = true
				break
			}
			cur = next
		}
		if !relinked {
			return cur, files[cur], nil
		}
	}
	return "", imageFile{}, fmt.Errorf("%s: too many links", name)
}

// builtArchive is the path of NAME's archive for ARCH under the current
// recipe; a missing one skips the test, and fails it under CI.
func builtArchive(t *testing.T, name, arch string) string {
	t.Helper()
	out, err := output("bash", imagesShPath, "path", name, arch)
	if err != nil {
		msg := fmt.Sprintf("the %s image for %s is not built (make images; testenv/images.sh build --arch %s): %v", name, arch, arch, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return out
}

// TestImages_PlatformsAreWhatTheyClaim (issue 25): each runtime image for
// amd64 and arm64 is one manifest whose config names linux and that
// architecture, and every ELF file in it (the wrapper, tini, bash, the C
// library and its loader, Node, Codex's binary, npm's native addons) is
// built for that architecture; the commands the image runs resolve, across
// its links, to files of that architecture.
func TestImages_PlatformsAreWhatTheyClaim(t *testing.T) {
	for _, arch := range []struct {
		name    string
		machine elf.Machine
		loader  string
	}{
		{"amd64", elf.EM_X86_64, "/lib64/ld-linux-x86-64.so.2"},
		{"arm64", elf.EM_AARCH64, "/lib/ld-linux-aarch64.so.1"},
	} {
		for _, image := range []struct {
			name string
			run  []string // executables that must be of the architecture
			not  []string // paths that must not exist
		}{
			{"openclaw", []string{"/usr/local/bin/node", "/usr/local/bin/occ-runtime", "/usr/bin/tini", "/usr/bin/bash", "/bin/sh", "/usr/bin/git", "/usr/bin/bwrap"},
				[]string{"/usr/local/lib/openclaw/node_modules/openclaw/dist/control-ui", "/usr/bin/perl", "/usr/bin/dpkg"}},
			{"codex", []string{"/usr/local/bin/codex", "/usr/local/bin/occ-runtime", "/usr/bin/tini", "/usr/bin/bash", "/usr/bin/git", "/usr/bin/bwrap"},
				[]string{"/usr/local/bin/node", "/usr/bin/perl"}},
		} {
			t.Run(image.name+"/"+arch.name, func(t *testing.T) {
				a := openOCIArchive(t, builtArchive(t, image.name, arch.name))
				if len(a.index) != 1 {
					t.Fatalf("%s: %d manifests in index.json; want one", a.path, len(a.index))
				}
				var m ociManifest
				a.json(t, a.index[0], &m)
				var cfg ociConfig
				a.json(t, m.Config, &cfg)
				if cfg.Architecture != arch.name || cfg.OS != "linux" {
					t.Errorf("config: %s/%s; want linux/%s", cfg.OS, cfg.Architecture, arch.name)
				}
				if cfg.Config.User != "1000:1000" || len(cfg.Config.Entrypoint) == 0 || cfg.Config.Entrypoint[0] != "/usr/bin/tini" {
					t.Errorf("config: user %q, entrypoint %q", cfg.Config.User, cfg.Config.Entrypoint)
				}
				if src := cfg.Config.Labels["org.opencontainers.image.source"]; !strings.HasPrefix(src, "https://github.com/") {
					t.Errorf("config: label org.opencontainers.image.source %q", src)
				}
				files := imageFiles(t, a, m)
				elfs, wrong := 0, []string{}
				for name, f := range files {
					if f.machine == 0 {
						continue
					}
					elfs++
					if f.machine != arch.machine {
						wrong = append(wrong, fmt.Sprintf("%s (%s)", name, f.machine))
					}
				}
				if len(wrong) > 0 {
					t.Errorf("%d of %d ELF files are not %s: %s", len(wrong), elfs, arch.machine, strings.Join(first(wrong, 20), ", "))
				}
				for _, name := range append(image.run, arch.loader) {
					target, f, err := resolve(files, name)
					switch {
					case err != nil:
						t.Errorf("%v", err)
					case f.machine != arch.machine:
						t.Errorf("%s (%s) is not a %s ELF file (%s)", name, target, arch.machine, f.machine)
					}
				}
				for _, name := range image.not {
					if _, _, err := resolve(files, name); err == nil {
						t.Errorf("%s is in the image; the recipe leaves it out", name)
					}
				}
				t.Logf("figures: %s/%s: %d files, %d ELF files, all %s", image.name, arch.name, len(files), elfs, arch.machine)
			})
		}
	}
}

// TestImages_IndexJoinsThePlatforms (issue 25): `images.sh index NAME` is
// one OCI archive whose image index names the amd64 and the arm64
// manifests, by the digests of the single-platform archives, with their
// platforms, under the image's name: what the release pushes.
func TestImages_IndexJoinsThePlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("writes an index archive of each image")
	}
	for _, name := range []string{"openclaw", "codex"} {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{}
			for _, arch := range []string{"amd64", "arm64"} {
				builtArchive(t, name, arch)
				d, err := output("bash", imagesShPath, "digest", name, arch)
				if err != nil {
					t.Fatal(err)
				}
				want[arch] = d
			}
			file, err := output("bash", imagesShPath, "index", name)
			if err != nil {
				t.Fatal(err)
			}
			a := openOCIArchive(t, file)
			if len(a.index) != 1 || a.index[0].MediaType != "application/vnd.oci.image.index.v1+json" {
				t.Fatalf("index.json: %+v; want one image index", a.index)
			}
			ref, err := output("bash", imagesShPath, "name", name)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.index[0].Annotations["org.opencontainers.image.ref.name"]; got != ref {
				t.Errorf("index.json names %q; want %q", got, ref)
			}
			var idx struct {
				SchemaVersion int             `json:"schemaVersion"`
				MediaType     string          `json:"mediaType"`
				Manifests     []ociDescriptor `json:"manifests"`
			}
			a.json(t, a.index[0], &idx)
			got := map[string]string{}
			for _, m := range idx.Manifests {
				if m.Platform == nil || m.Platform.OS != "linux" {
					t.Errorf("manifest %s: platform %+v", m.Digest, m.Platform)
					continue
				}
				got[m.Platform.Architecture] = m.Digest
				var man ociManifest
				a.json(t, m, &man) // the manifest and its config are in the archive
				for _, l := range append(man.Layers, man.Config) {
					if _, ok := a.blobs[l.Digest]; !ok {
						t.Errorf("%s: blob %s of the %s manifest is missing", file, l.Digest, m.Platform.Architecture)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the index names %v; the archives are %v", got, want)
			}
			digest, err := output("bash", imagesShPath, "index-digest", name)
			if err != nil {
				t.Fatal(err)
			}
			if digest != a.index[0].Digest {
				t.Errorf("index-digest %s; the archive's index is %s", digest, a.index[0].Digest)
			}
			t.Logf("figures: %s index %s: amd64 %s, arm64 %s", name, digest, want["amd64"], want["arm64"])
		})
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// output runs a command (in this package's directory) and returns its
// trimmed standard output, the tail of its standard error in the error.
func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return strings.TrimSpace(string(out)), nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
