package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
)

// anchorSet is bench/c's c-anchors.csv (workload,threads,metric,allocator,
// run,value), grouped by (workload, threads, metric) and allocator.
type anchorSet map[anchorKey]map[string][]float64

type anchorKey struct {
	workload string
	threads  int
	metric   string
}

type anchor struct {
	alloc string
	value float64
}

func readAnchors(path string) (anchorSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	set := anchorSet{}
	for i, row := range rows {
		if i == 0 || len(row) < 6 {
			continue
		}
		t, err1 := strconv.Atoi(row[1])
		v, err2 := strconv.ParseFloat(row[5], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		k := anchorKey{row[0], t, row[2]}
		if set[k] == nil {
			set[k] = map[string][]float64{}
		}
		set[k][row[3]] = append(set[k][row[3]], v)
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	return set, nil
}

func higherIsBetter(metric string) bool {
	return metric == "Mops/s" || metric == "M/s" || metric == "speedup-vs-T1"
}

// get is allocator alloc's median.
func (s anchorSet) get(workload string, threads int, metric, alloc string) (float64, bool) {
	v := s[anchorKey{workload, threads, metric}][alloc]
	if len(v) == 0 {
		return 0, false
	}
	return spreadOf(v).med, true
}

// best is the allocator with the best median, as bench/c/README.md says to
// pick it.
func (s anchorSet) best(workload string, threads int, metric string) (anchor, bool) {
	var b anchor
	found := false
	for alloc, v := range s[anchorKey{workload, threads, metric}] {
		m := spreadOf(v).med
		better := m > b.value
		if !higherIsBetter(metric) {
			better = m < b.value
		}
		if !found || better || (m == b.value && alloc < b.alloc) {
			b, found = anchor{alloc, m}, true
		}
	}
	return b, found
}
