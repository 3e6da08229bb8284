package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// Lists and maps from the settings file fill slice and map flags.
func TestSettingsFileListsAndMaps(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cli.yaml")
	if err := os.WriteFile(file, []byte("region: [eu-west, us-east]\ntag: {gpu: a100, class: spot}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var regions []string
	var tags map[string]string
	c := &cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, _ []string) error {
		regions, _ = cmd.Flags().GetStringSlice("region")
		tags, _ = cmd.Flags().GetStringToString("tag")
		return nil
	}}
	c.Flags().StringSlice("region", nil, "")
	c.Flags().StringToString("tag", nil, "")
	root := newRoot()
	root.AddCommand(c)
	root.SetArgs([]string{"probe", "--settings", file})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if len(regions) != 2 || regions[0] != "eu-west" || regions[1] != "us-east" {
		t.Fatalf("regions %v", regions)
	}
	if tags["gpu"] != "a100" || tags["class"] != "spot" || len(tags) != 2 {
		t.Fatalf("tags %v", tags)
	}
	t.Setenv("AX_REGION", "ap-south,eu-north")
	root = newRoot()
	root.AddCommand(c)
	root.SetArgs([]string{"probe", "--settings", ""})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if len(regions) != 2 || regions[1] != "eu-north" {
		t.Fatalf("regions from env %v", regions)
	}
}
