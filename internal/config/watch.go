package config

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the configuration when the process receives SIGHUP (or a
// value arrives on the WithSignals channel) and when the file changes, until
// ctx ends. Run it on its own goroutine; it returns once ctx is done and
// everything it started has stopped.
//
// File changes are seen by watching the file's directory, not the file, so
// that editors that save by writing a new file and renaming it over the old
// one, and Kubernetes ConfigMap volumes (which swap a "..data" symlink), are
// both noticed. When the path is a symlink, the directory of its target is
// watched too. Events are debounced (WithDebounce), and a change whose
// content equals the content last loaded or tried does not reload. SIGHUP
// always reloads. Failed reloads keep the last good configuration (see
// Reload). If the file cannot be watched (for example the inotify limit is
// reached), the error is logged and SIGHUP still works.
func (h *Holder) Watch(ctx context.Context) {
	sigs := h.signals
	if sigs == nil {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
		defer signal.Stop(ch)
		sigs = ch
	}
	fw := h.newFileWatch()
	if fw != nil {
		defer fw.close()
	}
	if h.watchReady != nil {
		close(h.watchReady)
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if fw != nil {
		events, errs = fw.w.Events, fw.w.Errors
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sigs:
			if !ok {
				sigs = nil
				continue
			}
			h.logger.Info("reload requested by signal", "file", h.path)
			_ = h.Reload()
			if fw != nil {
				fw.follow()
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if fw.relevant(ev) {
				timer.Reset(h.debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			h.logger.Warn("configuration file watch error", "file", h.path, "error", err)
		case <-timer.C:
			h.mu.Lock()
			_ = h.reloadLocked(true)
			h.mu.Unlock()
			fw.follow()
		}
	}
}

// fileWatch watches the directory of the configuration file and, when the
// file is a symlink, the directory of its target.
type fileWatch struct {
	h      *Holder
	w      *fsnotify.Watcher
	dir    string // directory of the path as given
	base   string // file name as given
	target string // resolved target path ("" when not a symlink)
}

// newFileWatch starts watching, or logs why it cannot and returns nil.
func (h *Holder) newFileWatch() *fileWatch {
	abs, err := filepath.Abs(h.path)
	if err != nil {
		abs = h.path
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		h.logger.Error("cannot watch the configuration file; reload it with SIGHUP", "file", h.path, "error", err)
		return nil
	}
	fw := &fileWatch{h: h, w: w, dir: filepath.Dir(abs), base: filepath.Base(abs)}
	if err := w.Add(fw.dir); err != nil {
		h.logger.Error("cannot watch the configuration directory; reload with SIGHUP", "dir", fw.dir, "error", err)
		_ = w.Close()
		return nil
	}
	fw.follow()
	return fw
}

// follow watches the directory of the file's current symlink target, if
// it is elsewhere.
func (fw *fileWatch) follow() {
	if fw == nil {
		return
	}
	real, err := filepath.EvalSymlinks(filepath.Join(fw.dir, fw.base))
	if err != nil {
		return // missing for now; the directory watch sees it come back
	}
	if real == filepath.Join(fw.dir, fw.base) {
		real = ""
	}
	if real == fw.target {
		return
	}
	if fw.target != "" && filepath.Dir(fw.target) != fw.dir {
		_ = fw.w.Remove(filepath.Dir(fw.target)) // may be gone already
	}
	fw.target = real
	if real != "" && filepath.Dir(real) != fw.dir {
		if err := fw.w.Add(filepath.Dir(real)); err != nil {
			fw.h.logger.Warn("cannot watch the configuration file's symlink target", "target", real, "error", err)
		}
	}
}

// relevant reports whether ev may have changed the file: an event on the
// file itself, on a Kubernetes "..data" symlink swap, or on the symlink
// target. Attribute-only changes are ignored.
func (fw *fileWatch) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Clean(ev.Name)
	if filepath.Dir(name) == fw.dir {
		b := filepath.Base(name)
		return b == fw.base || b == "..data"
	}
	return fw.target != "" && (name == fw.target || filepath.Dir(name) == filepath.Dir(fw.target))
}

// close stops the watcher and its goroutine.
func (fw *fileWatch) close() { _ = fw.w.Close() }
