package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/datahelix/datahelix/collective"
)

// rendezvous is what every rank's trainer needs to find the others: the
// torch.distributed master's address and port, and the job's id, which
// names the ranks' serve sockets.
type rendezvous struct {
	addr string
	port int
	job  string
}

// agreeRendezvous has rank 0 choose the rendezvous and broadcast it.
// MASTER_ADDR and MASTER_PORT already in rank 0's environment are kept
// (the user chose them). Otherwise the port is one rank 0 finds free,
// and the address is rank 0's loopback address when every rank runs on
// its node, else the address of rank 0 on the network that reaches the
// most other nodes, never a loopback one. The job id is job, else
// $DATAHELIX_JOB, else $SLURM_JOB_ID, else a random one.
func agreeRendezvous(c collective.Comm, job string) (rendezvous, error) {
	addrs, err := c.AllgatherVar([]byte(strings.Join(ipv4Nets(), " ")))
	if err != nil {
		return rendezvous{}, err
	}
	var mine []byte
	var chosen error
	if c.Rank() == 0 {
		var r rendezvous
		r, chosen = chooseRendezvous(c, addrs, job)
		mine = []byte(fmt.Sprintf("%s %d %s", r.addr, r.port, r.job))
	}
	if err := agreeOnError(c, chosen, "cannot choose the trainers' rendezvous"); err != nil {
		return rendezvous{}, err
	}
	all, err := c.AllgatherVar(mine)
	if err != nil {
		return rendezvous{}, err
	}
	f := strings.SplitN(string(all[0]), " ", 3)
	if len(f) != 3 {
		return rendezvous{}, collective.AllRanks(fmt.Errorf("rank 0 sent a rendezvous of %q", all[0]))
	}
	port, err := strconv.Atoi(f[1])
	if err != nil {
		return rendezvous{}, collective.AllRanks(fmt.Errorf("rank 0 sent the port %q", f[1]))
	}
	return rendezvous{addr: f[0], port: port, job: f[2]}, nil
}

// chooseRendezvous is rank 0's choice; nets are every rank's ipv4Nets.
func chooseRendezvous(c collective.Comm, nets [][]byte, job string) (rendezvous, error) {
	r := rendezvous{job: job}
	if r.job == "" {
		r.job = os.Getenv("DATAHELIX_JOB")
	}
	if r.job == "" {
		r.job = os.Getenv("SLURM_JOB_ID")
	}
	if r.job == "" {
		b := make([]byte, 6)
		rand.Read(b)
		r.job = hex.EncodeToString(b)
	}
	if strings.ContainsAny(r.job, " \x00/") {
		return r, fmt.Errorf("job id %q: want no spaces, slashes or NUL bytes", r.job)
	}
	r.addr = os.Getenv("MASTER_ADDR")
	if r.addr == "" {
		r.addr = masterAddr(c.Info().LocalSize == c.Size(), nets)
	}
	if p := os.Getenv("MASTER_PORT"); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return r, fmt.Errorf("MASTER_PORT=%s: want a port number", p)
		}
		r.port = port
		return r, nil
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return r, fmt.Errorf("find a free port for MASTER_PORT: %w", err)
	}
	r.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	return r, nil
}

// masterAddr picks rank 0's address for the trainers: loopback when the
// job runs on one node; else, of rank 0's networks (nets[0]), the one
// holding an address of the most other ranks.
func masterAddr(oneNode bool, nets [][]byte) string {
	if oneNode {
		return "127.0.0.1"
	}
	best, bestN := "", -1
	for _, cidr := range strings.Fields(string(nets[0])) {
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			continue
		}
		count := 0
		for _, other := range nets[1:] {
			for _, o := range strings.Fields(string(other)) {
				if oip, _, err := net.ParseCIDR(o); err == nil && !oip.Equal(ip) && n.Contains(oip) {
					count++
					break
				}
			}
		}
		if count > bestN {
			best, bestN = ip.String(), count
		}
	}
	if best == "" {
		host, _ := os.Hostname()
		return host
	}
	return best
}

// ipv4Nets lists this host's non-loopback IPv4 addresses on interfaces
// that are up, in CIDR form.
func ipv4Nets() []string {
	var out []string
	ifs, _ := net.Interfaces()
	for _, in := range ifs {
		if in.Flags&net.FlagUp == 0 || in.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := in.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				out = append(out, n.String())
			}
		}
	}
	return out
}

// ifaceFor names this host's interface on the network that holds addr
// (rank 0's MASTER_ADDR), "" when none does. A trainer's gloo binds the
// interface its host name resolves to, which on many nodes is none that
// reaches rank 0 (or the name does not resolve): train sets
// GLOO_SOCKET_IFNAME to this one unless the user set it.
func ifaceFor(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.IsLoopback() {
		return ""
	}
	ifs, _ := net.Interfaces()
	for _, in := range ifs {
		if in.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := in.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.Contains(ip) {
				return in.Name
			}
		}
	}
	return ""
}
