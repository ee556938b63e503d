// A 2018-era client through the gateway: kafka-go 0.2.1 (Debian's golang-github-segmentio-kafka-go-dev)
// produces with Produce v2 (message format v1) and reads back with Fetch v2.
// Usage: kafka_go_021 BOOTSTRAP TOPIC PRODUCE READ: produces PRODUCE messages to partition 0, then
// reads READ messages from offset 0 and prints "offset key value" for each, one a line.
// With a sixth argument GROUP, the READ messages are read by a consumer group member instead
// (JoinGroup v1, SyncGroup v0, OffsetCommit v2), committing each.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: kafka_go_021 BOOTSTRAP TOPIC PRODUCE READ [GROUP]")
		os.Exit(2)
	}
	bootstrap, topic := os.Args[1], os.Args[2]
	count, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fail("produce count", err)
	}
	toRead, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("read count", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", bootstrap, topic, 0)
	if err != nil {
		fail("dial leader", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	messages := make([]kafka.Message, count)
	for i := range messages {
		messages[i] = kafka.Message{Key: []byte("k-" + strconv.Itoa(i)), Value: []byte("old-client-" + strconv.Itoa(i))}
	}
	if count > 0 {
		if _, err := conn.WriteMessages(messages...); err != nil {
			fail("produce", err)
		}
	}
	if len(os.Args) == 6 {
		readAsGroup(ctx, bootstrap, topic, os.Args[5], toRead)
		return
	}
	if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
		fail("seek", err)
	}
	read := 0
	for read < toRead {
		batch := conn.ReadBatch(1, 10e6)
		for {
			message, err := batch.ReadMessage()
			if err != nil {
				break
			}
			fmt.Printf("%d %s %s\n", message.Offset, message.Key, message.Value)
			read++
		}
		if err := batch.Close(); err != nil {
			fail("fetch", err)
		}
	}
}

func readAsGroup(ctx context.Context, bootstrap, topic, group string, toRead int) {
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        []string{bootstrap},
		GroupID:        group,
		Topic:          topic,
		MinBytes:       1,
		MaxBytes:       10e6,
		MaxWait:        500 * time.Millisecond,
		SessionTimeout: 10 * time.Second,
	})
	defer reader.Close()
	for read := 0; read < toRead; read++ {
		message, err := reader.FetchMessage(ctx)
		if err != nil {
			fail("fetch in group", err)
		}
		if err := reader.CommitMessages(ctx, message); err != nil {
			fail("commit", err)
		}
		fmt.Printf("%d %s %s\n", message.Offset, message.Key, message.Value)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}
