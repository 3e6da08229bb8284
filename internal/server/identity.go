package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// federationID is the federation's id in the global etcd
// (<prefix>federation/id), made by the first server that finds none. It
// marks every region's Redis (region/identity). "" when the global etcd
// does not answer now: the Redis is then checked for its region only.
func (s *Server) federationID(ctx context.Context) string {
	key := s.cfg.Etcd.Prefix + "federation/id"
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	mine := hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.global.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, mine)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		s.log.Warn("federation id not read from the global etcd; the region's Redis is checked for its region only", "key", key, "err", err)
		return ""
	}
	if resp.Succeeded {
		return mine
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		return string(kvs[0].Value)
	}
	return ""
}
