// Command dropin shows one-line adoption. It is an existing program, a
// small crawler that fetches every page of a site with http.Get, made
// faster by adding one line to main:
//
//	transport.Install() // or: import _ "github.com/ferryhttp/ferry/install"
//
// To show the difference, it crawls a site it serves itself on loopback
// several times, alternating net/http and ferry (Install, then its undo),
// and prints pages per second for each round and the medians. It then runs
// the code path many libraries have, http.DefaultTransport.(*http.Transport)
// .Clone(), to show that it still works after Install, which keeps
// http.DefaultTransport an *http.Transport and routes its requests to
// ferry.
//
//	go run ./examples/dropin
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhttp/ferry/transport"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.pages, "pages", 2000, "pages on the site")
	flag.IntVar(&cfg.rounds, "rounds", 6, "crawls, alternating net/http and ferry (even)")
	flag.IntVar(&cfg.workers, "workers", 2, "concurrent fetches (net/http keeps 2 idle connections per host)")
	flag.Parse()
	cfg.out = os.Stdout
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "dropin:", err)
		os.Exit(1)
	}
}

type config struct {
	pages, rounds, workers int
	out                    io.Writer
}

// round is one crawl's outcome.
type round struct {
	ferry   bool
	pages   int
	elapsed time.Duration
}

func (r round) rate() float64 { return float64(r.pages) / r.elapsed.Seconds() }

func run(cfg config) error {
	if cfg.pages < 1 || cfg.workers < 1 || cfg.rounds < 2 || cfg.rounds%2 != 0 {
		return errors.New("-pages and -workers must be positive and -rounds even and at least 2")
	}
	site := newSite(cfg.pages)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: site, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		<-served
	}()
	root := "http://" + ln.Addr().String() + "/page/0"
	fmt.Fprintf(cfg.out, "crawling a %d-page site at %s with %d workers, %d rounds\n", cfg.pages, root, cfg.workers, cfg.rounds)

	var rounds []round
	var installed *transport.Transport
	var ferryRequests uint64
	for i := 0; i < cfg.rounds; i++ {
		// A B B A ...: each variant goes first as often as the other.
		// ferry's first: Install must come before http.DefaultTransport's
		// first request to take it over (afterwards it falls back to
		// http.DefaultClient); after its undo, net/http's rounds are
		// declined by the registration to net/http.
		useFerry := i%4 == 0 || i%4 == 3
		undo := func() {}
		if useFerry {
			undo = transport.Install() // the one line
			installed = transport.Installed()
		}
		before := site.served.Load()
		start := time.Now()
		n, err := crawl(root, cfg.workers)
		elapsed := time.Since(start)
		if useFerry {
			ferryRequests += installed.Stats().Requests.Total()
		}
		undo()
		if err != nil {
			return err
		}
		if got := site.served.Load() - before; n != cfg.pages || got != uint64(cfg.pages) {
			return fmt.Errorf("crawl %d: crawled %d pages, server served %d, site has %d", i+1, n, got, cfg.pages)
		}
		r := round{ferry: useFerry, pages: n, elapsed: elapsed}
		rounds = append(rounds, r)
		fmt.Fprintf(cfg.out, "crawl %d  %-8s %6d pages  %8.0f pages/s\n", i+1, variant(useFerry), n, r.rate())
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	nh, fe := median(rounds, false), median(rounds, true)
	fmt.Fprintf(cfg.out, "median   %-8s %8.0f pages/s\n", variant(false), nh)
	fmt.Fprintf(cfg.out, "median   %-8s %8.0f pages/s  (%.2fx)\n", variant(true), fe, fe/nh)
	want := uint64(cfg.pages * cfg.rounds / 2)
	fmt.Fprintf(cfg.out, "requests ferry carried: %d of %d in its rounds\n", ferryRequests, want)
	if ferryRequests != want {
		return fmt.Errorf("ferry carried %d requests, want %d: http.Get did not go through it", ferryRequests, want)
	}

	// What libraries do with http.DefaultTransport, after Install.
	undo := transport.Install()
	defer undo()
	status, err := libraryClientGet(root)
	if err != nil {
		return fmt.Errorf("library code path after Install: %w", err)
	}
	fmt.Fprintf(cfg.out, "after Install, http.DefaultTransport.(*http.Transport).Clone() still works: GET -> %d\n", status)
	return nil
}

func variant(ferry bool) string {
	if ferry {
		return "ferry"
	}
	return "net/http"
}

// median returns the median pages/s of the rounds of one variant.
func median(rs []round, ferry bool) float64 {
	var v []float64
	for _, r := range rs {
		if r.ferry == ferry {
			v = append(v, r.rate())
		}
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// libraryClientGet is what many libraries do to get a client of their own
// with the program's proxy and TLS settings.
func libraryClientGet(url string) (int, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// The existing program: a crawler using http.Get.

var linkRE = regexp.MustCompile(`href="(/page/[0-9]+)"`)

// crawl fetches every page reachable from root with workers goroutines
// and returns how many it fetched.
func crawl(root string, workers int) (int, error) {
	base := root[:strings.Index(root[len("http://"):], "/")+len("http://")]
	var (
		mu      sync.Mutex // guards seen, queue, pending, errOnce
		seen    = map[string]bool{root: true}
		queue   = []string{root}
		pending = 1 // queued or being fetched
		errOnce error
		cond    = sync.NewCond(&mu)
		fetched atomic.Int64
	)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				for len(queue) == 0 && pending > 0 && errOnce == nil {
					cond.Wait()
				}
				if pending == 0 || errOnce != nil {
					mu.Unlock()
					return
				}
				u := queue[len(queue)-1]
				queue = queue[:len(queue)-1]
				mu.Unlock()

				links, err := fetchLinks(u)
				mu.Lock()
				if err != nil && errOnce == nil {
					errOnce = err
				}
				fetched.Add(1)
				for _, l := range links {
					if full := base + l; !seen[full] {
						seen[full] = true
						queue = append(queue, full)
						pending++
					}
				}
				pending--
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return int(fetched.Load()), errOnce
}

// fetchLinks GETs u and returns the page links in it.
func fetchLinks(u string) ([]string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var links []string
	for _, m := range linkRE.FindAllSubmatch(body, -1) {
		links = append(links, string(m[1]))
	}
	return links, nil
}

// site serves pages /page/0 .. /page/n-1; page i links to 2i+1 and 2i+2
// (a binary tree: every page reachable from page 0, found once) and back
// to page 0.
type site struct {
	n      int
	served atomic.Uint64
}

func newSite(n int) *site { return &site{n: n} }

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/page/"))
	if err != nil || i < 0 || i >= s.n || !strings.HasPrefix(r.URL.Path, "/page/") {
		http.NotFound(w, r)
		return
	}
	s.served.Add(1)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<html><body><h1>page %d</h1>", i)
	for _, j := range []int{2*i + 1, 2*i + 2, 0} {
		if j < s.n {
			fmt.Fprintf(w, `<a href="/page/%d">page %d</a> `, j, j)
		}
	}
	io.WriteString(w, "</body></html>\n")
}
