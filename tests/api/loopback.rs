//! A scripted OpenAI-protocol server on loopback: it answers each request with the next
//! scripted reply and records what it received.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Answers with this status and body.
    Body(u16, String),
    /// Waits this long before answering 200 (longer than the client's timeout).
    Hang(Duration),
    /// Closes the connection without answering.
    Drop,
}

pub fn ok(body: Value) -> Reply {
    Reply::Body(200, body.to_string())
}

pub fn error(status: u16, message: &str) -> Reply {
    Reply::Body(
        status,
        json!({"error": {"message": message, "type": "test", "param": null, "code": null}})
            .to_string(),
    )
}

pub fn chat_body(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000u32,
        "model": "test-model-2026",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}
    })
}

pub fn embedding_body(vectors: &[(u32, Vec<f32>)]) -> Value {
    let data: Vec<Value> = vectors
        .iter()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    json!({
        "object": "list",
        "model": "embed-test",
        "data": data,
        "usage": {"prompt_tokens": 4, "total_tokens": 4}
    })
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A scripted HTTP/1.1 server on 127.0.0.1.
#[derive(Clone)]
pub struct Server {
    pub base: String,
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    pub async fn start(script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server {
            base: format!("http://{}/v1", listener.local_addr().unwrap()),
            script: Arc::new(Mutex::new(script.into())),
            received: Arc::new(Mutex::new(Vec::new())),
        };
        let s = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move { s.serve(stream).await });
            }
        });
        server
    }

    pub fn push(&self, reply: Reply) {
        self.script.lock().unwrap().push_back(reply);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    async fn serve(&self, mut stream: TcpStream) {
        // Each connection carries one request (the answer says `Connection: close`).
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let header_end = loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or("").split(' ');
        let method = start.next().unwrap_or("").to_owned();
        let path = start.next().unwrap_or("").to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < header_end + length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body =
            serde_json::from_slice(&buf[header_end..header_end + length]).unwrap_or(Value::Null);
        self.received.lock().unwrap().push(Received {
            method,
            path,
            headers,
            body,
        });
        let reply = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| error(500, "the test script has no reply left"));
        let (status, body) = match reply {
            Reply::Body(status, body) => (status, body),
            Reply::Hang(d) => {
                tokio::time::sleep(d).await;
                (200, chat_body("too late").to_string())
            }
            Reply::Drop => return,
        };
        let response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
}
